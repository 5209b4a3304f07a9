/**
 * Pass 2 with the real CLI over a history that needs preparing: an image in
 * a prompt and a file read early on. The summary request carries `[image]`
 * instead of the image; after the boundary the file comes back as the CLI's
 * own `file` attachment; the resumed CLI sends the summary plus the window,
 * nothing from before, and does not compact again.
 */
import { describe, expect, it } from "@effect/vitest"
import { TaskManager } from "@skein/kernel"
import { ResumeLoader } from "@skein/store"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Option } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CompactableSession from "../src/CompactableSession.js"
import * as Compaction from "../src/Compaction.js"
import * as Live from "./live.js"

/** A 1×1 PNG. */
const pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

describe("summarizing compaction with the real CLI", () => {
  it.scopedLive("prepares the history, restores the read file after the boundary, and the resumed CLI sends only the new view", () =>
    Effect.gen(function*() {
      const d = yield* ClaudeCli.offlineDirs("skein-compact2-")
      const notes = Path.join(Fs.realpathSync(d.cwd), "notes.txt")
      Fs.writeFileSync(notes, "alpha\nbeta\n")
      const asked = (request: FakeModel.RecordedRequest) =>
        FakeModel.anyMessages(request) && Live.lastUserText(request).includes("Context compaction")
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.toolUse("Read", { file_path: notes }),
          FakeModel.text("The notes say alpha and beta."),
          FakeModel.text("A single pixel."),
          FakeModel.text("Noted the third."),
          FakeModel.matching(FakeModel.text("<summary>Notes read; a pixel seen.</summary>"), asked),
          FakeModel.text("Fourth answer.")
        ]
      })
      const session = yield* CompactableSession.start({ ...Live.sessionOptions(model, d), allowedTools: ["Read"] })
      const send = (content: Parameters<typeof session.send>[0]) => Effect.flatMap(session.send(content), (t) => t.result)
      yield* send(`first: read the notes. ${"Background detail. ".repeat(200)}`)
      yield* send([
        { type: "text", text: "second: what is this image?" },
        { type: "image", source: { type: "base64", media_type: "image/png", data: pixel } }
      ])
      yield* send("third: note it.")
      const state = yield* Effect.flatMap(session.current, (s) => s.state.get)
      const transcript = state.transcriptPath!
      const linesBefore = Fs.readFileSync(transcript, "utf8").trimEnd().split("\n").length

      const tasks = yield* TaskManager.make({ root: Path.join(d.root, "tasks") })
      const outcome = yield* Compaction.run(session, { pass: "summarize", window: { minTokens: 1, minTextMessages: 1 } }).pipe(
        Effect.provide(Live.storeLayer(d.configDir)),
        Effect.provideService(TaskManager.TaskManager, tasks)
      )
      expect(outcome._tag === "Compacted" && outcome.pass).toBe("summarize")

      // The summary request: the image is a placeholder; the conversation is there.
      const summaryRequest = yield* model.awaitRequest(0, asked)
      const body = Option.getOrThrow(summaryRequest.messagesRequest)
      const blocks = body.messages.flatMap((m) => typeof m.content === "string" ? [] : m.content)
      expect(blocks.some((b) => b.type === "image")).toBe(false)
      expect(FakeModel.messagesText(summaryRequest)).toContain("[image]")
      expect(FakeModel.messagesText(summaryRequest)).toContain("first: read the notes.")

      // After the boundary: boundary, summary, the file as the CLI writes it.
      const after = Fs.readFileSync(transcript, "utf8").trimEnd().split("\n").slice(linesBefore).map((l) => JSON.parse(l))
      const chain = after.filter((e) => e.type === "system" || e.type === "user" || e.type === "attachment")
      expect(chain.map((e) => e.type)).toEqual(["system", "user", "attachment"])
      expect(chain[2].attachment).toMatchObject({ type: "file", filename: notes, content: { type: "text", file: { content: "alpha\nbeta\n" } } })
      // No placeholder reached the session's own file: the prepared copy was a throwaway.
      expect(Fs.readFileSync(transcript, "utf8")).not.toContain("\"[image]\"")
      expect(Fs.readdirSync(Path.dirname(transcript)).filter((f) => f.endsWith(".jsonl")).length).toBeLessThanOrEqual(2)

      const fourth = yield* send("fourth question?")
      expect(fourth.text).toBe("Fourth answer.")
      const request = yield* model.awaitRequest(0, Live.withPrompt("fourth question?"))
      const text = FakeModel.messagesText(request)
      expect(text).toContain("Notes read; a pixel seen.")
      expect(text).not.toContain("first: read the notes.")
      expect(text).not.toContain("second: what is this image?")
      expect(text).toContain("Noted the third.")
      expect((yield* model.requests).filter(asked)).toHaveLength(1)
      expect((yield* model.requests).filter(FakeModel.isCompaction).length).toBeLessThanOrEqual(1)

      const current = yield* session.current
      yield* current.end
      yield* current.exit
      const view = yield* ResumeLoader.load(transcript)
      const prompt = view.messages.findIndex((m) => Live.textOf(m).includes("fourth question?"))
      expect(prompt).toBeGreaterThan(0)
      expect(Live.comparable(Live.history(request).before)).toEqual(Live.comparable(view.messages.slice(0, prompt)))
    }).pipe(Effect.provide(Live.sessionLayer)), { timeout: 150_000 })
})
