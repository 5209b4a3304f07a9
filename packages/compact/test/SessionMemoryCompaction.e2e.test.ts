/**
 * Pass 1 against the real CLI: a session of two turns, ended; skein compacts
 * its transcript with `summary.md`; the CLI, resumed, must send FakeModel
 * exactly the summary and the retained window, nothing from before the
 * boundary, and skein's ResumeLoader view must equal what it sent.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { ResumeLoader } from "@skein/store"
import { FakeModel } from "@skein/testkit"
import { Effect, Option } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Compaction from "../src/Compaction.js"
import * as SessionMemoryCompaction from "../src/SessionMemoryCompaction.js"
import * as Live from "./live.js"

const SUMMARY = "The user asked two questions about colours; the answers were red and blue."

describe("session-memory compaction with the real CLI", () => {
  it.scopedLive("the resumed CLI sends exactly the summary plus the retained window", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.text("The first colour is red."),
          FakeModel.text("The second colour is blue."),
          FakeModel.text("Green comes third.")
        ]
      })
      const first = yield* Live.converse({ model, prompts: [`first question: colour one? ${"Some long context. ".repeat(200)}`, "second question: colour two?"] })
      expect(first.exitCode).toBe(0)
      const session = yield* Live.sessionFile(first.run.configDir, first.run.cwd)
      const before = yield* ResumeLoader.load(session.path)
      const summaryFile = SessionMemoryCompaction.summaryPath(session.path)
      Fs.mkdirSync(Path.dirname(summaryFile), { recursive: true })
      Fs.writeFileSync(summaryFile, `${SUMMARY}\n`)
      const sizeBefore = Fs.statSync(session.path).size
      const oldBytes = Fs.readFileSync(session.path)

      // Keep the last two text messages: the second question and its answer.
      const outcome = yield* Compaction.memoryPass({
        cwd: session.cwd,
        sessionId: session.id,
        window: { minTokens: 0, minTextMessages: 2 }
      }).pipe(Effect.provide(Live.storeLayer(first.run.configDir)))
      expect(outcome._tag).toBe("Compacted")
      if (outcome._tag !== "Compacted") return
      expect(outcome.postTokens).toBeLessThan(outcome.preTokens)
      // Old lines are never touched: the file only grew.
      expect(Fs.readFileSync(session.path).subarray(0, sizeBefore).equals(oldBytes)).toBe(true)

      const view = yield* ResumeLoader.load(session.path)
      expect(Option.map(view.boundary, (b) => b.uuid)).toEqual(Option.some(outcome.boundaryUuid))
      const texts = view.messages.map(Live.textOf)
      expect(texts[0]).toContain(SUMMARY)
      expect(texts.join("\n")).not.toContain("first question")
      expect(texts.join("\n")).not.toContain("The first colour is red.")
      expect(texts.join("\n")).toContain("second question: colour two?")
      expect(texts[texts.length - 1]).toBe("The second colour is blue.")
      expect(view.usage.input_tokens + view.usage.output_tokens).toBe(0)
      expect(view.messages.length).toBeLessThan(before.messages.length)

      const resumed = yield* Live.converse({
        model,
        prompts: ["third question: colour three?"],
        args: ["--resume", session.id],
        configDir: first.run.configDir
      })
      expect(resumed.exitCode).toBe(0)
      const request = yield* model.awaitRequest(0, Live.withPrompt("third question"))
      const sent = Live.history(request)
      expect(Live.comparable(sent.before)).toEqual(Live.comparable(view.messages))
      expect(FakeModel.messagesText(request)).not.toContain("first question")
      expect(FakeModel.messagesText(request)).not.toContain("The first colour is red.")
      // The next turn works, and the CLI does not compact again at once.
      expect(resumed.results).toHaveLength(1)
      const requests = yield* model.requests
      expect(requests.some(FakeModel.isCompaction)).toBe(false)
      expect(JSON.stringify(resumed.results[0])).toContain("Green comes third.")
    }).pipe(Effect.provide(NodeContext.layer)), { timeout: 120_000 })

  it.scopedLive("a second compaction over a compacted session: the resumed CLI sends exactly the new view", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.text("Answer A."), FakeModel.text("Answer B."), FakeModel.text("Answer C."), FakeModel.text("Answer D.")]
      })
      const first = yield* Live.converse({ model, prompts: [`question A ${"padding ".repeat(400)}`, "question B"] })
      const session = yield* Live.sessionFile(first.run.configDir, first.run.cwd)
      const summaryFile = SessionMemoryCompaction.summaryPath(session.path)
      Fs.mkdirSync(Path.dirname(summaryFile), { recursive: true })
      const compact = (summary: string, keep: number) =>
        Effect.sync(() => Fs.writeFileSync(summaryFile, summary)).pipe(
          Effect.zipRight(Compaction.memoryPass({ cwd: session.cwd, sessionId: session.id, window: { minTokens: 0, minTextMessages: keep } })),
          Effect.provide(Live.storeLayer(first.run.configDir))
        )
      expect((yield* compact("First summary: A was asked.", 2))._tag).toBe("Compacted")
      yield* Live.converse({ model, prompts: [`question C ${"padding ".repeat(400)}`], args: ["--resume", session.id], configDir: first.run.configDir })
      // The window now reaches back over the first boundary: answer B, kept by it, is kept again.
      expect((yield* compact("Second summary: A, B and C were asked.", 3))._tag).toBe("Compacted")
      const view = yield* ResumeLoader.load(session.path)
      const texts = view.messages.map(Live.textOf).join("\n")
      expect(texts).toContain("Second summary")
      expect(texts).not.toContain("First summary")
      expect(texts).not.toContain("question A")
      expect(texts).not.toContain("question B")
      expect(texts).toContain("Answer B.")

      yield* Live.converse({ model, prompts: ["question D"], args: ["--resume", session.id], configDir: first.run.configDir })
      const request = yield* model.awaitRequest(0, Live.withPrompt("question D"))
      expect(Live.comparable(Live.history(request).before)).toEqual(Live.comparable(view.messages))
    }).pipe(Effect.provide(NodeContext.layer)), { timeout: 120_000 })
})
