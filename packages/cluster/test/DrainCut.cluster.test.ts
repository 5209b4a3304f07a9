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
import { FakeModel } from "@skein/testkit"
import { Effect } from "effect"
import { joinMidTurn } from "./joinMidTurn.js"
import * as Processes from "./processes.js"

const token = "cluster-token-0123456789"

/** Far longer than a join and a 2 s drain: two words every 5 s, about 100 s in all. */
const streamed = Array.from({ length: 20 }, (_, i) => `word${i} streamed`).join(" ")

describe("a turn that outlasts its drain", () => {
  it.scopedLive("is cut when its shard moves, ends RunnerLost on the edge, is not run again, and the session goes on on the new runner", () =>
    Effect.gen(function*() {
      const { a, b, c, callA, database, hostPid, model, moving, ofSession, watcher } = yield* joinMidTurn({
        name: "draincut",
        token,
        ports: [34551,
        34552,
        34553],
        prompt: "a turn that outlasts the drain",
        streamed,
        turnDrainMillis: 2_000
      })

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
