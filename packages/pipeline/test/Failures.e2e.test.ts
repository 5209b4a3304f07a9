/**
 * End-to-end: a durable run records an item that failed after its retries,
 * and a run started again under the same id runs it again, reporting the
 * recorded failure as the reason of its retry; the items done are not sent
 * again. FakeModel answers file 01's review with a verdict the schema
 * refuses until the test makes it healthy.
 */
import { describe, expect, it } from "@effect/vitest"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Fiber, Layer, Stream } from "effect"
import * as Path from "node:path"
import { Journal, Pipeline, Run, type RunEvent } from "../src/index.js"
import * as Support from "./support.js"

const reviews = Pipeline.from<Support.File>().pipe(Pipeline.through(Support.review, { concurrency: 3 }))
const files = Support.files(3)
const badPrompt = Support.reviewPrompt(files[1]!)

describe("a durable run's failed items with the real CLI", () => {
  it.scopedLive("a failure is recorded, and a run started again tries that item again (its retry gives the recorded failure), and only it", () =>
    Effect.gen(function*() {
      let healthy = false
      const model = yield* FakeModel.make({
        fallback: (request) =>
          FakeModel.isConversation(request) && Support.lastUserText(request) === badPrompt && !healthy
            ? FakeModel.toolUse("StructuredOutput", { file: "src/file01.ts", risk: "medium", notes: "?" })
            : Support.answer()(request)
      })
      const d = yield* ClaudeCli.offlineDirs("skein-pipeline-failures-")
      const services = Layer.mergeAll(Support.launch(model, d), Journal.layerSqlite(Path.join(d.root, "journal.db")))
      const runOnce = (options: Run.Options) =>
        Effect.scoped(Effect.gen(function*() {
          const handle = yield* Run.start(reviews, files, { runId: "failures-1", ...options })
          const events = yield* Effect.fork(Stream.runCollect(handle.events))
          const result = yield* handle.await
          return { result, events: Array.from(yield* Fiber.join(events)) as ReadonlyArray<RunEvent.RunEvent> }
        })).pipe(Effect.provide(services))
      const sent = Effect.map(model.requests, (requests) => requests.filter(FakeModel.isConversation).length)

      const first = yield* runOnce({})
      expect(first.result.outputs.map((v) => v.file)).toEqual(["src/file00.ts", "src/file02.ts"])
      expect(first.events.filter((e) => e._tag === "ItemFailed")).toMatchObject([{ index: 1 }])

      // Started again, the model still failing: only the failed item is sent again, its retry says why, and it fails again.
      const again = yield* runOnce({})
      expect(again.result.outputs).toEqual(first.result.outputs)
      expect(again.events.filter((e) => e._tag === "ItemStarted")).toMatchObject([{ index: 1 }])
      const retry = again.events.filter((e) => e._tag === "ItemRetried")
      expect(retry).toMatchObject([{ index: 1, attempt: 1 }])
      expect(retry[0]!._tag === "ItemRetried" && retry[0]!.reason).toMatch(/^failed in an earlier run: .*StructuredOutputInvalid/)
      expect(again.events.filter((e) => e._tag === "ItemFailed")).toMatchObject([{ index: 1 }])
      expect(again.result.summary).toMatchObject({ done: 2, failed: 1, recorded: 2 })
      expect(Support.requestsFor(yield* model.requests, badPrompt)).toBe(2)

      // The model healthy now: the next run gets the item right.
      healthy = true
      const fixed = yield* runOnce({})
      expect(fixed.result.outputs.map((v) => v.file)).toEqual(["src/file00.ts", "src/file01.ts", "src/file02.ts"])
      expect(fixed.events.filter((e) => e._tag === "ItemStarted")).toMatchObject([{ index: 1 }])
      expect(Support.requestsFor(yield* model.requests, badPrompt)).toBe(3)
      for (const i of [0, 2]) expect(Support.requestsFor(yield* model.requests, Support.reviewPrompt(files[i]!))).toBe(1)

      // Its success is recorded: one more run sends nothing.
      const before = yield* sent
      const done = yield* runOnce({})
      expect(yield* sent).toBe(before)
      expect(done.result.outputs).toEqual(fixed.result.outputs)
      expect(done.result.summary).toMatchObject({ done: 3, failed: 0, recorded: 3 })
      expect(Support.clisUnder(d.configDir)).toEqual([])
    }).pipe(Effect.provide(Support.layer)), 120_000)
})
