/**
 * `Compaction.run` over a live session with the real CLI: the pass ends the
 * CLI, compacts, resumes the same id, and the next turn sees exactly the
 * summary and the retained window.
 */
import { describe, expect, it } from "@effect/vitest"
import { TaskManager } from "@skein/kernel"
import { ResumeLoader } from "@skein/store"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Chunk, Effect, Queue } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CompactableSession from "../src/CompactableSession.js"
import * as Compaction from "../src/Compaction.js"
import * as SessionMemoryCompaction from "../src/SessionMemoryCompaction.js"
import * as Live from "./live.js"

const SUMMARY = "Two questions were asked about planets; the answers were Mars and Venus."

describe("Compaction.run with the real CLI", () => {
  it.scopedLive("ends the CLI, compacts with summary.md, resumes the same session, and the next turn sees the new view", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.text("The first planet is Mars."), FakeModel.text("The second is Venus."), FakeModel.text("Third: Jupiter.")]
      })
      const d = yield* ClaudeCli.offlineDirs("skein-compact-")
      const session = yield* CompactableSession.start(Live.sessionOptions(model, d))
      const compactions = yield* session.compactions
      yield* Effect.flatMap(session.send(`first planet? ${"Background detail. ".repeat(300)}`), (t) => t.result)
      yield* Effect.flatMap(session.send("second planet?"), (t) => t.result)
      const before = yield* Effect.flatMap(session.current, (s) => s.state.get)
      const id = yield* Effect.flatMap(session.current, (s) => s.sessionId)
      const transcript = before.transcriptPath!
      const summaryFile = SessionMemoryCompaction.summaryPath(transcript)
      Fs.mkdirSync(Path.dirname(summaryFile), { recursive: true })
      Fs.writeFileSync(summaryFile, SUMMARY)

      const tasks = yield* TaskManager.make({ root: Path.join(d.root, "tasks") })
      const outcome = yield* Compaction.run(session, { window: { minTokens: 0, minTextMessages: 2 } }).pipe(
        Effect.provide(Live.storeLayer(d.configDir)),
        Effect.provideService(TaskManager.TaskManager, tasks)
      )
      expect(outcome._tag === "Compacted" && outcome.pass).toBe("memory")
      const events = Chunk.toReadonlyArray(yield* Queue.takeAll(compactions))
      expect(events.map((e) => e._tag)).toEqual(["Started", "Finished"])

      // Same conversation, new process.
      const after = yield* session.current
      expect(after).not.toBe(before)
      const third = yield* Effect.flatMap(session.send("third planet?"), (t) => t.result)
      expect(third.text).toBe("Third: Jupiter.")
      expect(yield* after.sessionId).toBe(id)
      const request = yield* model.awaitRequest(0, Live.withPrompt("third planet?"))
      const text = FakeModel.messagesText(request)
      expect(text).toContain(SUMMARY)
      expect(text).not.toContain("first planet?")
      expect(text).not.toContain("The first planet is Mars.")
      expect(text).toContain("The second is Venus.")
      expect((yield* model.requests).some(FakeModel.isCompaction)).toBe(false)
      // What skein loads after the boundary is what the resumed CLI sent (up to the third prompt).
      yield* after.end
      yield* after.exit
      const view = yield* ResumeLoader.load(transcript)
      const prompt = view.messages.findIndex((m) => Live.textOf(m).includes("third planet?"))
      expect(prompt).toBeGreaterThan(0)
      expect(Live.comparable(Live.history(request).before)).toEqual(Live.comparable(view.messages.slice(0, prompt)))
    }).pipe(Effect.provide(Live.sessionLayer)), { timeout: 120_000 })

  it.scopedLive("without summary.md pass 1 declines and pass 2 asks a forked worker; the resumed CLI sends its summary", () =>
    Effect.gen(function*() {
      const worded = (marker: string): FakeModel.RequestMatch => (request) =>
        FakeModel.anyMessages(request) && Live.lastUserText(request).includes(marker)
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.text("The first metal is iron."),
          FakeModel.text("The second is copper."),
          FakeModel.matching(FakeModel.text("<summary>Metals so far: iron, then copper.</summary>"), worded("Context compaction")),
          FakeModel.text("Third: tin.")
        ]
      })
      const d = yield* ClaudeCli.offlineDirs("skein-compact-")
      const session = yield* CompactableSession.start(Live.sessionOptions(model, d))
      const compactions = yield* session.compactions
      yield* Effect.flatMap(session.send(`first metal? ${"Background detail. ".repeat(300)}`), (t) => t.result)
      yield* Effect.flatMap(session.send("second metal?"), (t) => t.result)
      const parentRequest = yield* model.awaitRequest(1, FakeModel.isConversation)

      const tasks = yield* TaskManager.make({ root: Path.join(d.root, "tasks") })
      const outcome = yield* Compaction.run(session, { window: { minTokens: 0, minTextMessages: 2 } }).pipe(
        Effect.provide(Live.storeLayer(d.configDir)),
        Effect.provideService(TaskManager.TaskManager, tasks)
      )
      expect(outcome._tag === "Compacted" && outcome.pass).toBe("summarize")
      const events = Chunk.toReadonlyArray(yield* Queue.takeAll(compactions))
      expect(events.map((e) => e._tag === "Finished" ? `${e._tag}:${e.outcome._tag}` : e._tag)).toEqual([
        "Started",
        "Finished:Declined",
        "Started",
        "Finished:Compacted"
      ])
      // The worker's request starts with the parent's messages: the cache prefix is shared.
      const asked = yield* model.awaitRequest(0, worded("Context compaction"))
      const prefix = Live.comparable(Live.history(parentRequest).before)
      const forked = Live.history(asked).before
      expect(Live.comparable(forked.slice(0, Live.history(parentRequest).before.length))).toEqual(prefix)

      const third = yield* Effect.flatMap(session.send("third metal?"), (t) => t.result)
      expect(third.text).toBe("Third: tin.")
      const request = yield* model.awaitRequest(0, Live.withPrompt("third metal?"))
      const text = FakeModel.messagesText(request)
      expect(text).toContain("Metals so far: iron, then copper.")
      expect(text).not.toContain("first metal?")
      expect(text).not.toContain("Context compaction")
      expect(text).toContain("The second is copper.")
      // The worker's was the only summarization request: the resumed CLI did not compact again.
      expect((yield* model.requests).filter(FakeModel.isCompaction)).toHaveLength(1)
    }).pipe(Effect.provide(Live.sessionLayer)), { timeout: 120_000 })
})
