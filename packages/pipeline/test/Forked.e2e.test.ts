/**
 * End-to-end: a forked stage. One base session per run is told a brief;
 * each item is a `Worker.fork` of it, so each item's request starts with the
 * base's messages (the shared cache prefix), and its structured output comes
 * back typed.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { TaskManager } from "@skein/kernel"
import { TranscriptLayout, TranscriptStore } from "@skein/store"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Fiber, Layer, Option, Stream } from "effect"
import * as Path from "node:path"
import { Pipeline, Run, Stage } from "../src/index.js"
import * as Support from "./support.js"

const brief = "Project brief: every file of this project is reviewed for the use of eval."

const review = Stage.forked({
  name: "review",
  prompt: Support.reviewPrompt,
  outputSchema: Support.Verdict,
  fork: { base: brief }
})

const messagesOf = (request: FakeModel.RecordedRequest) =>
  Option.match(request.messagesRequest, { onNone: () => [], onSome: (body) => body.messages })

/** A message's text blocks, without the cache marks the CLI moves to the last message. */
const textOf = (message: ReturnType<typeof messagesOf>[number]): string =>
  typeof message.content === "string"
    ? message.content
    : message.content.flatMap((block) => block.type === "text" && "text" in block ? [block.text] : []).join("\n")

describe("a forked stage with the real CLI", () => {
  it.scopedLive("items forked from a base send the base's messages as their prefix", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ fallback: Support.answer() })
      const d = yield* ClaudeCli.offlineDirs("skein-pipeline-fork-")
      const tasks = yield* TaskManager.make({ root: Path.join(d.root, "runtime") })
      const store = yield* Layer.build(TranscriptStore.layer.pipe(Layer.provide(TranscriptLayout.layer(d.configDir)), Layer.provide(NodeContext.layer)))
      const files = Support.files(4)
      const handle = yield* Run.start(Pipeline.from<Support.File>().pipe(Pipeline.through(review, { concurrency: 2 })), files).pipe(
        Effect.provide(Support.launch(model, d)),
        Effect.provide(store),
        Effect.provideService(TaskManager.TaskManager, tasks)
      )
      const events = yield* Effect.fork(Stream.runCollect(handle.events))
      const result = yield* handle.await
      expect(Array.from(yield* Fiber.join(events)).filter((e) => e._tag === "ItemFailed")).toEqual([])
      expect(result.outputs.map((v) => v.file)).toEqual(files.map((f) => f.name))
      expect(result.outputs.map((v) => v.risk)).toEqual(["high", "low", "low", "high"])

      const requests = (yield* model.requests).filter(FakeModel.isConversation)
      const base = requests.filter((r) => Support.lastUserText(r) === brief)
      expect(base).toHaveLength(1)
      const prefix = messagesOf(base[0]!).filter((m) => m.role !== "system").map(textOf)
      for (const file of files) {
        const forked = requests.filter((r) => Support.lastUserText(r) === Support.reviewPrompt(file))
        expect(forked).toHaveLength(1)
        const messages = messagesOf(forked[0]!).filter((m) => m.role !== "system")
        // The brief, then the base's answer, then the item's prompt.
        expect(messages.slice(0, prefix.length).map(textOf)).toEqual(prefix)
        expect(messages.map(textOf)).toContain("Noted.")
      }
      // Workers are tasks of the TaskManager, one per item.
      expect((yield* tasks.list).filter((t) => t.type === "local_agent")).toHaveLength(4)
    }).pipe(Effect.provide(Support.layer)), 120_000)
})
