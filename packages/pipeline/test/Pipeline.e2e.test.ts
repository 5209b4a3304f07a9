/**
 * End-to-end: pipelines of real Claude Code sessions against FakeModel.
 */
import { describe, expect, it } from "@effect/vitest"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Schema, Stream } from "effect"
import { Run } from "../src/index.js"
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
})
