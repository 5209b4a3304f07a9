/**
 * End-to-end: a durable run records an item that failed after its retries,
 * and a run started again under the same id reports it. By default a resume
 * runs it again (reported first as a retry with the recorded failure);
 * `recordedFailures: "keep"` reports the recorded failure and sends nothing.
 * FakeModel answers file 01's review with a verdict the schema refuses
 * until the test makes it healthy.
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
  it.scopedLive("a failure is recorded: kept, it is reported without a request; by default a resume runs it again", () =>
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
      expect(first.events.filter((e) => e._tag === "ItemFailed")).toMatchObject([{ index: 1, recorded: false }])

      // Kept: the recorded failure is reported as it was, and nothing reaches the model.
      const before = yield* sent
      const kept = yield* runOnce({ recordedFailures: "keep" })
      expect(yield* sent).toBe(before)
      expect(kept.result.outputs).toEqual(first.result.outputs)
      const keptFailure = kept.events.filter((e) => e._tag === "ItemFailed")
      expect(keptFailure).toMatchObject([{ index: 1, recorded: true }])
      expect(keptFailure[0]!._tag === "ItemFailed" && keptFailure[0]!.reason).toContain("StructuredOutputInvalid")
      expect(kept.events.filter((e) => e._tag === "ItemStarted")).toEqual([])
      expect(kept.result.summary).toMatchObject({ done: 2, failed: 1, recorded: 3 })

      // The default: the failed item, and only it, is sent again; the model answers well now.
      healthy = true
      const retried = yield* runOnce({})
      expect(retried.result.outputs.map((v) => v.file)).toEqual(["src/file00.ts", "src/file01.ts", "src/file02.ts"])
      expect(retried.events.filter((e) => e._tag === "ItemStarted")).toMatchObject([{ index: 1 }])
      const retry = retried.events.filter((e) => e._tag === "ItemRetried")
      expect(retry).toMatchObject([{ index: 1, attempt: 1 }])
      expect(retry[0]!._tag === "ItemRetried" && retry[0]!.reason).toMatch(/^failed in an earlier run: .*StructuredOutputInvalid/)
      expect(Support.requestsFor(yield* model.requests, badPrompt)).toBeGreaterThanOrEqual(2)
      for (const i of [0, 2]) expect(Support.requestsFor(yield* model.requests, Support.reviewPrompt(files[i]!))).toBe(1)

      // Its success replaced the recorded failure: a kept run now has all three, and sends nothing.
      const after = yield* sent
      const settled = yield* runOnce({ recordedFailures: "keep" })
      expect(yield* sent).toBe(after)
      expect(settled.result.outputs).toEqual(retried.result.outputs)
      expect(settled.result.summary).toMatchObject({ done: 3, failed: 0, recorded: 3 })
      expect(Support.clisUnder(d.configDir)).toEqual([])
    }).pipe(Effect.provide(Support.layer)), 120_000)
})
