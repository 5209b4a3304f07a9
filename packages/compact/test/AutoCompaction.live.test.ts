/**
 * Automatic compaction with the real CLI and a tiny context window: it fires
 * after each turn, the breaker opens after 3 forced failures (FakeModel
 * refuses the summary request), automatic runs then stop, and a manual run
 * that succeeds closes it.
 */
import { describe, expect, it } from "@effect/vitest"
import { TaskManager } from "@skein/kernel"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Option, Stream } from "effect"
import * as Path from "node:path"
import * as AutoCompaction from "../src/AutoCompaction.js"
import * as CompactableSession from "../src/CompactableSession.js"
import * as Live from "./live.js"

const refusal = FakeModel.error(400, "invalid_request_error", "summary refused")

describe("AutoCompaction with the real CLI", () => {
  it.scopedLive("fires after each turn; the breaker opens after 3 failures and closes after a success", () =>
    Effect.gen(function*() {
      // Summary requests are refused (the CLI retries each a few times) until `refusing` is switched off.
      let refusing = true
      const model = yield* FakeModel.make({
        fallback: (request) =>
          refusing && FakeModel.isCompaction(request)
            ? refusal
            : typeof FakeModel.defaultFallback === "function"
            ? FakeModel.defaultFallback(request)
            : FakeModel.defaultFallback
      })
      const d = yield* ClaudeCli.offlineDirs("skein-compact-")
      const tasks = yield* TaskManager.make({ root: Path.join(d.root, "tasks") })
      const provide = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        effect.pipe(Effect.provide(Live.storeLayer(d.configDir)), Effect.provideService(TaskManager.TaskManager, tasks))
      const session = yield* CompactableSession.start(Live.sessionOptions(model, d))
      // Any context is over 10% of a 10-token window.
      const auto = yield* provide(AutoCompaction.start(session, { contextWindow: 10, threshold: 0.1, window: { minTokens: 0, minTextMessages: 1 } }))
      const failures = (n: number) =>
        auto.breaker.changes.pipe(Stream.filter((s) => s.consecutiveFailures === n), Stream.runHead, Effect.timeout("60 seconds"))

      for (let i = 1; i <= 3; i++) {
        yield* Effect.flatMap(session.send(`turn ${i}: ${"context ".repeat(200)}`), (t) => t.result)
        yield* failures(i)
      }
      const open = yield* auto.breaker.get
      expect(open.open).toBe(true)
      expect(open.lastFailure).toBe("failed")
      // The session's state says so too.
      const stateOpen = yield* session.state.changes.pipe(Stream.filter((s) => s.compaction?.breakerOpen === true), Stream.runHead, Effect.timeout("10 seconds"))
      expect(Option.map(stateOpen, (s) => s.compaction)).toEqual(Option.some({ compacting: false, lastOutcome: "failed", breakerOpen: true }))
      const compactionsBefore = (yield* model.requests).filter(FakeModel.isCompaction).length
      expect(compactionsBefore).toBeGreaterThanOrEqual(3)

      // Open: the next turn triggers nothing.
      const fourth = yield* Effect.flatMap(session.send("turn 4"), (t) => t.result)
      expect(fourth.text).toBeDefined()
      yield* Effect.sleep("1 second")
      expect((yield* model.requests).filter(FakeModel.isCompaction)).toHaveLength(compactionsBefore)
      expect((yield* auto.breaker.get).open).toBe(true)

      // A manual run goes through; FakeModel now answers the summary, and the breaker closes.
      refusing = false
      const outcome = yield* provide(auto.compact({ pass: "summarize" }))
      expect(outcome._tag).toBe("Compacted")
      expect(yield* auto.breaker.get).toEqual({ consecutiveFailures: 0, open: false, lastFailure: undefined })
      const closed = yield* session.state.changes.pipe(Stream.filter((s) => s.compaction?.breakerOpen === false), Stream.runHead, Effect.timeout("10 seconds"))
      expect(Option.map(closed, (s) => s.compaction)).toEqual(Option.some({ compacting: false, lastOutcome: "compacted", breakerOpen: false }))
      const fifth = yield* Effect.flatMap(session.send("turn 5"), (t) => t.result)
      expect(fifth.text).toBeDefined()
    }).pipe(Effect.provide(Live.sessionLayer)), { timeout: 180_000 })
})
