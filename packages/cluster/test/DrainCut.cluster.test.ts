/**
 * A turn that outlasts its drain. Two runners (OS processes over one
 * Postgres, the real CLI and FakeModel, each given a 2 s `turnDrain`) host
 * the sessions; a third joins while a session's turn streams slowly, and
 * that session's shard is one the join moves to it. The runner hosting the
 * turn lets it go on for the drain only, then cuts it and releases the
 * shard: an SSE client on the edge sees the turn end with `session.error`
 * `RunnerLost` (the prompt, delivered again on the new runner, is not sent
 * to the model again), and the next prompt runs on the new runner over the
 * history up to the cut.
 */
import { describe, expect, it } from "@effect/vitest"
import { ClaudeCli, FakeModel, Postgres } from "@skein/testkit"
import { Effect, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Processes from "./processes.js"

const token = "cluster-token-0123456789"

/** Far longer than a join and a 2 s drain: two words every 5 s, about 100 s in all. */
const streamed = Array.from({ length: 20 }, (_, i) => `word${i} streamed`).join(" ")

describe("a turn that outlasts its drain", () => {
  it.scopedLive("is cut when its shard moves, ends RunnerLost on the edge, is not run again, and the session goes on on the new runner", () =>
    Effect.gen(function*() {
      const pg = yield* Postgres.start()
      const database = Redacted.value(yield* pg.database("draincut"))
      const model = yield* FakeModel.make({
        fallback: (request) =>
          FakeModel.promptOf(request).includes("outlasts")
            ? FakeModel.withDelay(FakeModel.text(streamed), "5 seconds")
            : FakeModel.text(`Answer to ${FakeModel.promptOf(request)}.`)
      })
      const shared = yield* ClaudeCli.offlineDirs("skein-cluster-draincut-")
      const cwd = Fs.realpathSync(shared.cwd)
      const configOf = (name: string, runnerPort: number) => {
        return {
          database,
          ...Processes.runnerDirs(shared.root, name),
          cwd,
          modelUrl: model.url,
          runnerPort,
          token,
          runner: "Socket" as const,
          turnDrainMillis: 2_000
        }
      }
      const a = yield* Processes.spawnRunner(configOf("a", 34551))
      const b = yield* Processes.spawnRunner(configOf("b", 34552))
      yield* Processes.awaitShardsSettled(database, [a, b])
      const cConfig = configOf("c", 34553)

      // A session whose shard the third runner will take: its owner with a, b and c is c.
      const { hostPid, session: moving } = yield* Processes.sessionMovingTo(database, [a, b], cConfig, cwd)
      const callA = Processes.api(a.url, token)

      // The turn streams; the third runner joins meanwhile.
      const watcher = Processes.subscribe(a.url, token, cwd)
      yield* Effect.promise(() => watcher.until((f) => f.type === "server.connected", 10_000))
      const ofSession = (f: Processes.Frame) => f.properties["sessionID"] === moving.id
      yield* Effect.promise(() => callA("POST", `/session/${moving.id}/prompt_async`, { parts: [{ type: "text", text: "a turn that outlasts the drain" }] }))
      yield* model.awaitRequest(0, (r) => FakeModel.isConversation(r) && FakeModel.promptOf(r).includes("outlasts"))
      expect(yield* Processes.turnRunnerPid(database, moving.id)).toBe(hostPid)
      yield* Effect.promise(() => watcher.until((f) => f.type === "message.part.delta" && ofSession(f), 30_000))
      const c = yield* Processes.spawnRunner(cConfig)
      const joinedBeforeTheEnd = !watcher.frames.some((f) => f.type === "session.idle" && ofSession(f))
      expect(joinedBeforeTheEnd).toBe(true)

      // Its runner lets it go on for the drain, then cuts it and stops its CLI (serve closes the open turn, idle);
      // the prompt, delivered again on the new runner, ends RunnerLost there, then idle.
      const lostAt = yield* Effect.promise(() => watcher.until((f) => Processes.errorName(f) === "RunnerLost" && ofSession(f), 120_000)).pipe(
        Effect.map((frames) => frames.findIndex((f) => Processes.errorName(f) === "RunnerLost" && ofSession(f)))
      )
      const after = (index: number) => (f: Processes.Frame) => watcher.frames.indexOf(f) > index
      const seen = yield* Effect.promise(() => watcher.until((f) => f.type === "session.idle" && ofSession(f) && after(lostAt)(f), 30_000))
      expect(seen.filter((f) => f.type === "session.error" && ofSession(f)).map(Processes.errorName)).toEqual(["RunnerLost"])
      const host = [a, b].find((r) => r.child.pid === hostPid)!
      expect(host.output()).toContain(`${moving.id}'s shard moves: its running turn may finish first`)
      // Cut before its reply was whole: the deltas seen do not hold the last words.
      const deltas = seen.filter((f) => f.type === "message.part.delta" && ofSession(f)).map((f) => String(f.properties["delta"]))
      expect(deltas.length).toBeGreaterThan(0)
      expect(deltas.join("")).not.toContain("word19")
      yield* Processes.awaitShardsSettled(database, [a, b, c])
      const cut = yield* Processes.turns(database, moving.id)
      expect(cut.at(-1)).toEqual({ pid: hostPid, outcome: "lost" })

      // The next prompt runs on the new runner over the history up to the cut; the cut prompt reached the model once.
      const next = yield* Effect.promise(() => callA("POST", `/session/${moving.id}/message`, { parts: [{ type: "text", text: "after the cut" }] }))
      expect(JSON.stringify(next)).toContain("Answer to after the cut.")
      const request = yield* model.awaitRequest(0, (r) => FakeModel.isConversation(r) && FakeModel.promptOf(r).includes("after the cut"))
      const history = FakeModel.messagesText(request)
      expect(history).toContain(`Answer to first of ${moving.id}.`)
      expect(history).toContain("a turn that outlasts the drain")
      const conversations = (yield* model.requests).filter(FakeModel.isConversation)
      expect(conversations.filter((r) => FakeModel.promptOf(r).includes("outlasts")).length).toBe(1)
      const ledger = yield* Processes.turns(database, moving.id)
      expect(ledger.at(-1)).toEqual({ pid: c.child.pid, outcome: "answered" })
      expect(ledger.at(-2)).toEqual({ pid: hostPid, outcome: "lost" })
      const nextAt = watcher.frames.indexOf(seen.at(-1)!)
      yield* Effect.promise(() => watcher.until((f) => f.type === "session.idle" && ofSession(f) && after(nextAt)(f), 30_000))
      expect(watcher.frames.filter((f) => f.type === "session.error" && ofSession(f)).map(Processes.errorName)).toEqual(["RunnerLost"])
      watcher.close()
    }), { timeout: 300_000 })
})
