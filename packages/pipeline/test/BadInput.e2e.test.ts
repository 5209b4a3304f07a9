/**
 * End-to-end: what a run does with bad input. FakeModel answers file 01's
 * review with a verdict the schema refuses (risk "medium").
 */
import { describe, expect, it } from "@effect/vitest"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Fiber, Schedule, Stream } from "effect"
import { Pipeline, Run, Stage } from "../src/index.js"
import * as Support from "./support.js"

const answer = (request: FakeModel.RecordedRequest): FakeModel.Reply =>
  FakeModel.isConversation(request) && Support.lastUserText(request).includes("file01")
    ? FakeModel.toolUse("StructuredOutput", { file: "src/file01.ts", risk: "medium", notes: "?" })
    : Support.answer()(request)

const retried = Stage.make({
  name: "review",
  prompt: Support.reviewPrompt,
  outputSchema: Support.Verdict,
  retry: Schedule.recurs(1)
})

describe("bad input with the real CLI", () => {
  it.scopedLive("an output the schema refuses fails that item after its retry, and the run goes on", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ fallback: answer })
      const d = yield* ClaudeCli.offlineDirs("skein-pipeline-bad-")
      const handle = yield* Run.start(Pipeline.from<Support.File>().pipe(Pipeline.through(retried, { concurrency: 3 })), Support.files(3)).pipe(
        Effect.provide(Support.launch(model, d))
      )
      const events = yield* Effect.fork(Stream.runCollect(handle.events))
      const result = yield* handle.await
      expect(result.outputs.map((v) => v.file)).toEqual(["src/file00.ts", "src/file02.ts"])
      const all = Array.from(yield* Fiber.join(events))
      const failed = all.filter((e) => e._tag === "ItemFailed")
      expect(failed).toHaveLength(1)
      expect(failed[0]).toMatchObject({ index: 1 })
      expect(failed[0]!._tag === "ItemFailed" && failed[0]!.reason).toContain("StructuredOutputInvalid")
      expect(all.filter((e) => e._tag === "ItemRetried")).toMatchObject([{ index: 1, attempt: 2 }])
      expect(Support.requestsFor(yield* model.requests, Support.reviewPrompt(Support.files(3)[1]!))).toBe(2)
      expect(result.summary).toMatchObject({ done: 2, failed: 1, settled: 3 })
    }).pipe(Effect.provide(Support.layer)), 120_000)

  it.scopedLive("failFast: the failure ends the run", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ fallback: answer })
      const d = yield* ClaudeCli.offlineDirs("skein-pipeline-bad-")
      const strict = Stage.make({ name: "review", prompt: Support.reviewPrompt, outputSchema: Support.Verdict, failFast: true })
      const error = yield* Effect.flip(
        Run.collect(Pipeline.from<Support.File>().pipe(Pipeline.through(strict)), Support.files(3)).pipe(Effect.provide(Support.launch(model, d)))
      )
      expect(error).toMatchObject({ _tag: "StageFailed", stage: "review", cause: "StructuredOutputInvalid" })
      expect(Support.clisUnder(d.configDir)).toEqual([])
    }).pipe(Effect.provide(Support.layer)), 120_000)

  it.scopedLive("an input stream that fails ends the run with its failure, after the items in flight settle", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ fallback: Support.answer() })
      const d = yield* ClaudeCli.offlineDirs("skein-pipeline-bad-")
      const inputs = Stream.concat(Stream.fromIterable(Support.files(2)), Stream.fail("the listing broke" as const))
      const handle = yield* Run.start(Pipeline.from<Support.File>().pipe(Pipeline.through(Support.review, { concurrency: 2 })), inputs).pipe(
        Effect.provide(Support.launch(model, d))
      )
      const events = yield* Effect.fork(Stream.runCollect(handle.events))
      expect(yield* Effect.flip(handle.await)).toBe("the listing broke")
      const all = Array.from(yield* Fiber.join(events))
      expect(all.filter((e) => e._tag === "ItemDone")).toHaveLength(2)
      expect(all.at(-1)).toMatchObject({ _tag: "RunEnded", outcome: "failed" })
    }).pipe(Effect.provide(Support.layer)), 120_000)
})
