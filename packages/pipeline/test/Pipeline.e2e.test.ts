/**
 * End-to-end: pipelines of real Claude Code sessions against FakeModel.
 */
import { describe, expect, it } from "@effect/vitest"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Duration, Effect, Fiber, Schema, Stream } from "effect"
import { Pipeline, Run, Stage } from "../src/index.js"
import * as Support from "./support.js"

describe("a two-stage run with the real CLI", () => {
  it.scopedLive("12 items at concurrency 4: 12 typed verdicts in input order and one summary; each prompt sent once", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ fallback: Support.answer() })
      const d = yield* ClaudeCli.offlineDirs("skein-pipeline-")
      const inputs = Support.files(12)
      const handle = yield* Run.start(Support.pipeline, inputs).pipe(Effect.provide(Support.launch(model, d)))
      const events = yield* Stream.runCollect(handle.events).pipe(Effect.fork)
      const result = yield* handle.await

      expect(result.outputs).toHaveLength(1)
      const [gathered] = result.outputs
      expect(gathered!.items.map((v) => v.file)).toEqual(inputs.map((f) => f.name))
      for (const verdict of gathered!.items) expect(Schema.is(Support.Verdict)(verdict)).toBe(true)
      expect(gathered!.items.filter((v) => v.risk === "high").map((v) => v.file)).toEqual(["src/file00.ts", "src/file03.ts", "src/file06.ts", "src/file09.ts"])
      expect(gathered!.output).toEqual({ high: ["src/file00.ts", "src/file03.ts", "src/file06.ts", "src/file09.ts"], text: "12 files, 4 high risk" })

      const requests = yield* model.requests
      for (const file of inputs) expect(Support.requestsFor(requests, Support.reviewPrompt(file))).toBe(1)
      expect(requests.filter((r) => FakeModel.isConversation(r) && Support.lastUserText(r).startsWith("Summarize")).length).toBe(1)

      // Never more than 4 review sessions at once, as the events tell.
      const all = Array.from(yield* events.await.pipe(Effect.flatten))
      let running = 0
      let most = 0
      for (const event of all) {
        if (event._tag === "ItemStarted" && event.stage === "review") most = Math.max(most, ++running)
        if ((event._tag === "ItemDone" || event._tag === "ItemFailed") && event.stage === "review") running--
      }
      expect(most).toBe(4)
      expect(all.at(-1)).toMatchObject({ _tag: "RunEnded", outcome: "done", done: 13, failed: 0, pending: 0 })
      expect(result.summary).toMatchObject({ total: 12, read: 12, settled: 12, done: 13, running: 0 })
      expect(result.summary.spent.usd).toBeGreaterThan(0)
    }).pipe(Effect.provide(Support.layer)), 120_000)

  it.scopedLive("map, filter and all: a fan-out to two stages gathered in a record, plain Effects between", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ fallback: Support.answer() })
      const d = yield* ClaudeCli.offlineDirs("skein-pipeline-")
      const second = Stage.make({ name: "second", prompt: (f: Support.File) => Support.reviewPrompt(f).replace("Review", "Review again"), outputSchema: Support.Verdict })
      const pipeline = Pipeline.from<Support.File>().pipe(
        Pipeline.map((f) => Effect.succeed({ ...f, name: f.name.replace("src/", "lib/") })),
        Pipeline.all({ first: Support.review, second }, { concurrency: 3 }),
        Pipeline.filter(({ first }) => Effect.succeed(first.risk === "high")),
        Pipeline.map(({ first, second }) => Effect.succeed(`${first.file}: ${first.risk}/${second.risk}`))
      )
      const handle = yield* Run.start(pipeline, Support.files(6)).pipe(Effect.provide(Support.launch(model, d)))
      const result = yield* handle.await
      expect(result.outputs).toEqual(["lib/file00.ts: high/high", "lib/file03.ts: high/high"])
      // Both stages ran on every item: 12 sessions; the four filtered out are settled too.
      expect(result.summary).toMatchObject({ done: 12, settled: 6, failed: 0 })
    }).pipe(Effect.provide(Support.layer)), 120_000)

  it.scopedLive("a stage's timeout fails the item and stops its session", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ fallback: Support.answer({ delay: () => Duration.seconds(20) }) })
      const d = yield* ClaudeCli.offlineDirs("skein-pipeline-")
      const slow = Stage.make({ name: "review", prompt: Support.reviewPrompt, outputSchema: Support.Verdict, timeout: "1500 millis" })
      const handle = yield* Run.start(Pipeline.from<Support.File>().pipe(Pipeline.through(slow)), Support.files(1)).pipe(
        Effect.provide(Support.launch(model, d))
      )
      const events = yield* Effect.fork(Stream.runCollect(handle.events))
      const result = yield* handle.await
      expect(result.outputs).toEqual([])
      const failed = Array.from(yield* Fiber.join(events)).filter((e) => e._tag === "ItemFailed")
      expect(failed).toHaveLength(1)
      expect(failed[0]!._tag === "ItemFailed" && failed[0]!.reason).toContain("(Timeout)")
      expect(Support.clisUnder(d.configDir)).toEqual([])
    }).pipe(Effect.provide(Support.layer)), 120_000)
})
