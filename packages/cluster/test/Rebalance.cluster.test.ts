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
import { FakeModel } from "@skein/testkit"
import { Effect } from "effect"
import { joinMidTurn } from "./joinMidTurn.js"
import * as Processes from "./processes.js"

const token = "cluster-token-0123456789"

/** Eight chunks of two words, one every few seconds: the turn streams for tens of seconds, across the join. */
const streamed = "Streamed across the join, chunk by chunk, until the very end."

describe("a runner joins while a turn streams", () => {
  it.scopedLive("the turn whose shard moves ends with its reply on its runner, then the session runs on the new one", () =>
    Effect.gen(function*() {
      const { a, b, c, callA, database, hostPid, model, moving, ofSession, watcher } = yield* joinMidTurn({
        name: "rebalance",
        token,
        ports: [34541,
        34542,
        34543],
        prompt: "a turn that streams across a join",
        streamed
      })

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
