/**
 * A runner joining while a turn streams. Two runners (OS processes over one
 * Postgres, the real CLI and FakeModel) host the sessions; a third joins
 * while a session's turn is streaming, and that session's shard is one the
 * join moves to it. The turn is not cut: the runner hosting it lets it
 * finish (`SessionHost`'s turn drain) and releases the shard after, so an
 * SSE client sees the turn end with its reply and no error; the prompt,
 * delivered again on the new runner, is answered from the ledger (its turn
 * was answered) and never sent to the model twice; and the next prompt runs
 * on the new runner with the streamed reply in its history.
 */
import { describe, expect, it } from "@effect/vitest"
import { ClaudeCli, FakeModel, Postgres } from "@skein/testkit"
import { Effect, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Processes from "./processes.js"

const token = "cluster-token-0123456789"

/** Eight chunks of two words, one every few seconds: the turn streams for tens of seconds, across the join. */
const streamed = "Streamed across the join, chunk by chunk, until the very end."

describe("a runner joins while a turn streams", () => {
  it.scopedLive("the turn whose shard moves ends with its reply on its runner, then the session runs on the new one", () =>
    Effect.gen(function*() {
      const pg = yield* Postgres.start()
      const database = Redacted.value(yield* pg.database("rebalance"))
      const model = yield* FakeModel.make({
        fallback: (request) =>
          FakeModel.promptOf(request).includes("streams across")
            ? FakeModel.withDelay(FakeModel.text(streamed), "5 seconds")
            : FakeModel.text(`Answer to ${FakeModel.promptOf(request)}.`)
      })
      const shared = yield* ClaudeCli.offlineDirs("skein-cluster-rebalance-")
      const cwd = Fs.realpathSync(shared.cwd)
      const configOf = (name: string, runnerPort: number) => {
        return {
          database,
          ...Processes.runnerDirs(shared.root, name),
          cwd,
          modelUrl: model.url,
          runnerPort,
          token,
          runner: "Socket" as const
        }
      }
      const a = yield* Processes.spawnRunner(configOf("a", 34541))
      const b = yield* Processes.spawnRunner(configOf("b", 34542))
      yield* Processes.awaitShardsSettled(database, [a, b])
      const cConfig = configOf("c", 34543)

      // A session whose shard the third runner will take: its owner with a, b and c is c.
      const { hostPid, session: moving } = yield* Processes.sessionMovingTo(database, [a, b], cConfig, cwd)
      const callA = Processes.api(a.url, token)

      // The turn streams; the third runner joins meanwhile.
      const watcher = Processes.subscribe(a.url, token, cwd)
      yield* Effect.promise(() => watcher.until((f) => f.type === "server.connected", 10_000))
      const ofSession = (f: Processes.Frame) => f.properties["sessionID"] === moving.id
      yield* Effect.promise(() => callA("POST", `/session/${moving.id}/prompt_async`, { parts: [{ type: "text", text: "a turn that streams across a join" }] }))
      yield* model.awaitRequest(0, (r) => FakeModel.isConversation(r) && FakeModel.promptOf(r).includes("streams across"))
      expect(yield* Processes.turnRunnerPid(database, moving.id)).toBe(hostPid)
      yield* Effect.promise(() => watcher.until((f) => f.type === "message.part.delta" && ofSession(f), 30_000))
      const c = yield* Processes.spawnRunner(cConfig)
      const joinedBeforeTheEnd = !watcher.frames.some((f) => f.type === "session.idle" && ofSession(f))
      expect(joinedBeforeTheEnd).toBe(true)

      // The turn ends with its reply, no error; its runner had let it finish before it released the shard.
      const seen = yield* Effect.promise(() => watcher.until((f) => f.type === "session.idle" && ofSession(f), 120_000))
      expect(seen.filter((f) => f.type === "session.error" && ofSession(f)).map(Processes.errorName)).toEqual([])
      expect(seen.filter((f) => f.type === "message.part.delta" && ofSession(f)).length).toBeGreaterThan(1)
      const host = [a, b].find((r) => r.child.pid === hostPid)!
      expect(host.output()).toContain(`${moving.id}'s shard moves: its running turn may finish first`)
      yield* Processes.awaitShardsSettled(database, [a, b, c])

      // The next prompt runs on the new runner, with the streamed reply in its history; the streamed prompt ran once.
      const next = yield* Effect.promise(() => callA("POST", `/session/${moving.id}/message`, { parts: [{ type: "text", text: "after the join" }] }))
      expect(JSON.stringify(next)).toContain("Answer to after the join.")
      const request = yield* model.awaitRequest(0, (r) => FakeModel.isConversation(r) && FakeModel.promptOf(r).includes("after the join"))
      expect(FakeModel.messagesText(request)).toContain(streamed)
      const conversations = (yield* model.requests).filter(FakeModel.isConversation)
      expect(conversations.filter((r) => FakeModel.promptOf(r).includes("streams across")).length).toBe(1)
      const ledger = yield* Processes.turns(database, moving.id)
      expect(ledger.at(-1)).toEqual({ pid: c.child.pid, outcome: "answered" })
      expect(ledger.at(-2)).toEqual({ pid: hostPid, outcome: "answered" })
      yield* Effect.promise(() => watcher.until((f) => f.type === "session.idle" && ofSession(f) && f !== seen.at(-1), 30_000))
      expect(watcher.frames.filter((f) => f.type === "session.error" && ofSession(f))).toEqual([])
      watcher.close()
    }), { timeout: 300_000 })
})
