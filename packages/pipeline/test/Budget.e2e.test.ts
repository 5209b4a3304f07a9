/**
 * End-to-end: a run's budget against the real CLI. FakeModel's usage fixes
 * what each turn costs; a one-item run measures it, and the cap is set so
 * the fifth item's turn crosses it.
 */
import { describe, expect, it } from "@effect/vitest"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Duration, Effect, Stream } from "effect"
import { Pipeline, Run } from "../src/index.js"
import * as Support from "./support.js"

const usage = { input_tokens: 2000, output_tokens: 2000 }
const reviews = Pipeline.from<Support.File>().pipe(Pipeline.through(Support.review, { concurrency: 4 }))

describe("a run's budget with the real CLI", () => {
  it.scopedLive("5 items' cost crosses the cap: BudgetExceeded, no CLI left, no request after the interrupt", () =>
    Effect.gen(function*() {
      // The first four replies end far apart, so three more items start (while what is left covers a turn) before the fifth turn crosses.
      const delay = (prompt: string) => {
        const i = Support.fileIndex(prompt)
        return Duration.millis(i >= 0 && i < 4 ? i * 700 : 1500)
      }
      const model = yield* FakeModel.make({ fallback: Support.answer({ usage, delay }) })
      const d = yield* ClaudeCli.offlineDirs("skein-pipeline-budget-")
      const launch = Support.launch(model, d)
      const one = yield* Run.collect(reviews, [{ name: "calibration.ts", content: "x" }]).pipe(Effect.provide(launch))
      const perItem = one.summary.spent.usd
      expect(perItem).toBeGreaterThan(0)
      const cap = perItem * 4.5

      const inputs = Support.files(12)
      const handle = yield* Run.start(reviews, inputs, { budget: { usd: cap } }).pipe(Effect.provide(launch))
      const events = yield* Stream.runCollect(handle.events).pipe(Effect.fork)
      const error = yield* Effect.flip(handle.await)
      const sentAtEnd = (yield* model.requests).length

      if (error._tag !== "BudgetExceeded") return expect.fail(`expected BudgetExceeded, got ${error._tag}`)
      expect(error).toMatchObject({ reason: "crossed", done: 5 })
      expect(error.spent.usd).toBeGreaterThan(cap)
      expect(error.spent.usd).toBeCloseTo(perItem * 5, 6)
      // Pending: every item not out of the run, the one whose turn crossed included (its result is recorded, not emitted).
      expect(error.pending).toBe(12 - 4)
      // The run's end waited for its sessions to close: no CLI is left.
      expect(Support.clisUnder(d.configDir)).toEqual([])
      // Nothing reached FakeModel after the run ended (a straggler would show up within this second).
      yield* Effect.sleep("1 second")
      expect((yield* model.requests).length).toBe(sentAtEnd)
      const requests = yield* model.requests
      const sent = inputs.filter((file) => Support.requestsFor(requests, Support.reviewPrompt(file)) > 0)
      expect(sent.length).toBeLessThan(12)

      const all = Array.from(yield* events.await.pipe(Effect.flatten))
      expect(all.at(-1)).toMatchObject({ _tag: "RunEnded", outcome: "budget", done: 5 })
      // Sessions were in flight at the crossing: items started that never finished, and none started after it.
      const started = new Set(all.flatMap((e) => e._tag === "ItemStarted" ? [e.key] : []))
      const finished = new Set(all.flatMap((e) => e._tag === "ItemDone" ? [e.key] : []))
      expect(started.size).toBeGreaterThan(finished.size)
      // Once what was left could not cover the mean turn, items were skipped rather than started.
      const firstSkip = all.findIndex((e) => e._tag === "ItemSkipped")
      expect(firstSkip).toBeGreaterThan(0)
      expect(all.slice(firstSkip).filter((e) => e._tag === "ItemStarted")).toEqual([])
    }).pipe(Effect.provide(Support.layer)), 120_000)

  it.effect("a cap of 0 or below is refused before anything runs", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Run.collect(reviews, Support.files(2), { budget: { usd: 0 } }))
      expect(error).toMatchObject({ _tag: "BudgetInvalid", field: "usd", value: 0 })
      const tokens = yield* Effect.flip(Run.collect(reviews, Support.files(2), { budget: { usd: 1, tokens: -5 } }))
      expect(tokens).toMatchObject({ _tag: "BudgetInvalid", field: "tokens", value: -5 })
    }).pipe(Effect.provide(Support.launch({ url: "http://127.0.0.1:9" }, { root: "/nonexistent", cwd: "/nonexistent", configDir: "/nonexistent", tmpDir: "/nonexistent" })), Effect.provide(Support.layer)))
})
