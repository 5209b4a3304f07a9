/**
 * Session memory and session-memory compaction together, with the real CLI:
 * a message written after the last `summary.md` update is never dropped from
 * both the summary and the retained window. The summary is written after the
 * first turn; two more turns follow; compaction with a window that alone
 * would keep only the last message must keep both later turns.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Compaction, TokenCounter } from "@skein/compact"
import { ProcessHost, TaskManager } from "@skein/kernel"
import { MemoryEvents, SessionMemory } from "@skein/memory"
import type { Anthropic } from "@skein/protocol"
import { Session, Worker } from "@skein/session"
import { ResumeLoader, SessionIndex, SummaryCoverage, TranscriptLayout, TranscriptStore } from "@skein/store"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Layer, Option } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"

const marker = "skein session memory."
const isWorker: FakeModel.RequestMatch = (r) => FakeModel.isConversation(r) && FakeModel.messagesText(r).includes(marker)
const isMain: FakeModel.RequestMatch = (r) => FakeModel.isConversation(r) && !FakeModel.messagesText(r).includes(marker)

const textOf = (message: Anthropic.MessageParam): string =>
  typeof message.content === "string"
    ? message.content
    : message.content.map((block) => "text" in block && typeof block.text === "string" ? block.text : block.type).join("|")

describe("session memory and session-memory compaction with the real CLI", () => {
  it.scopedLive("a message written after the last summary.md update stays in the window", () =>
    Effect.gen(function*() {
      const d = yield* ClaudeCli.offlineDirs("skein-sm-compact-")
      const model = yield* FakeModel.make({ replies: [FakeModel.matching(FakeModel.text("First answer."), isMain)] })
      const tasks = yield* TaskManager.make({ root: Path.join(d.root, "tasks") })
      const stores = yield* Layer.build(
        Layer.mergeAll(TranscriptStore.layer, SessionIndex.layer, TokenCounter.layer).pipe(
          Layer.provide(TranscriptLayout.layer(d.configDir)),
          Layer.provide(NodeContext.layer)
        )
      )
      const launch: Session.SessionOptions = {
        cwd: d.cwd,
        configDir: d.configDir,
        env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: d.configDir, tmpDir: d.tmpDir }),
        bare: false,
        stopTimeouts: { stdinGrace: "500 millis", termGrace: "500 millis" }
      }
      const parent = yield* Session.start(launch)
      yield* Effect.flatMap(parent.send(`first question ${"context ".repeat(100)}`), (t) => t.result)
      const memory = yield* Effect.gen(function*() {
        const workers = yield* Worker.pool(parent, { launch })
        return yield* SessionMemory.make({ workers, launch })
      }).pipe(
        Effect.provide(stores),
        Effect.provideService(TaskManager.TaskManager, tasks),
        Effect.provideService(MemoryEvents.MemoryEvents, yield* MemoryEvents.make)
      )
      const file = yield* memory.summaryFile
      yield* model.enqueue(
        FakeModel.matching(FakeModel.toolUse("Write", { file_path: file, content: "# Current state\nThe first question was answered.\n" }), isWorker),
        FakeModel.matching(FakeModel.text("Summary written."), isWorker)
      )
      yield* memory.update
      expect(Option.isSome(yield* SummaryCoverage.read(file))).toBe(true)

      // Two turns the summary never saw.
      yield* model.enqueue(
        FakeModel.matching(FakeModel.text("Second answer."), isMain),
        FakeModel.matching(FakeModel.text("Third answer."), isMain)
      )
      yield* Effect.flatMap(parent.send(`second question ${"context ".repeat(100)}`), (t) => t.result)
      yield* Effect.flatMap(parent.send("third question"), (t) => t.result)
      const sessionId = yield* parent.sessionId
      yield* parent.end
      yield* Effect.ignore(Effect.timeout(parent.exit, "5 seconds"))

      // Alone, this window would keep the last message only.
      const cwd = Fs.realpathSync(d.cwd)
      const outcome = yield* Compaction.memoryPass({ cwd, sessionId, window: { minTokens: 0, minTextMessages: 1 } }).pipe(
        Effect.provide(stores)
      )
      expect(outcome._tag).toBe("Compacted")
      const view = yield* ResumeLoader.load(Session.transcriptPath(d.configDir, d.cwd, sessionId))
      const texts = view.messages.map(textOf).join("\n")
      expect(texts).toContain("The first question was answered.")
      expect(texts).not.toContain("first question context")
      expect(texts).not.toContain("First answer.")
      for (const kept of ["second question", "Second answer.", "third question", "Third answer."]) expect(texts).toContain(kept)
    }).pipe(Effect.provide(Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer))), { timeout: 120_000 })
})
