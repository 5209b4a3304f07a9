/**
 * Pass 1's summary on a stored session: `summary.md` is declined when empty
 * or a bare template, its oversized sections are cut, and the point it
 * covers (`summary.covered.json`, written by session memory) keeps every
 * later message in the window.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { ResumeLoader, SummaryCoverage, TranscriptLayout } from "@skein/store"
import { ClaudeCli } from "@skein/testkit"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Compaction from "../src/Compaction.js"
import * as SessionMemoryCompaction from "../src/SessionMemoryCompaction.js"
import * as Live from "./live.js"

/** A stored session of `turns` turns, each a prompt and a reply of about 100 tokens; no CLI runs it. */
const stored = (turns: number) =>
  Effect.gen(function*() {
    const d = yield* ClaudeCli.offlineDirs("skein-smc-")
    const cwd = Fs.realpathSync(d.cwd)
    const sessionId = randomUUID()
    const path = TranscriptLayout.make(d.configDir).session(cwd, sessionId).transcript
    const uuids: Array<string> = []
    const lines = Array.from({ length: turns * 2 }, (_, i) => {
      const uuid = randomUUID()
      const common = {
        uuid,
        parentUuid: uuids.at(-1) ?? null,
        isSidechain: false,
        sessionId,
        cwd,
        timestamp: new Date(Date.UTC(2026, 11, 1, 0, 0, i)).toISOString()
      }
      uuids.push(uuid)
      const text = `${i % 2 === 0 ? "question" : "answer"} ${i >> 1}: ${"x".repeat(400)}`
      return JSON.stringify(
        i % 2 === 0
          ? { ...common, type: "user", message: { role: "user", content: text } }
          : {
            ...common,
            type: "assistant",
            message: {
              id: `msg_${i}`,
              type: "message",
              role: "assistant",
              model: "m",
              content: [{ type: "text", text }],
              stop_reason: "end_turn",
              stop_sequence: null,
              usage: { input_tokens: 1, output_tokens: 1 }
            }
          }
      )
    })
    Fs.mkdirSync(Path.dirname(path), { recursive: true })
    Fs.writeFileSync(path, lines.join("\n") + "\n", { mode: 0o600 })
    const summaryFile = SessionMemoryCompaction.summaryPath(path)
    Fs.mkdirSync(Path.dirname(summaryFile), { recursive: true })
    const pass = (window?: SessionMemoryCompaction.WindowOptions) =>
      Compaction.memoryPass({ cwd, sessionId, window }).pipe(Effect.provide(Live.storeLayer(d.configDir)))
    return { path, summaryFile, uuids, pass }
  })

/** Headings with the italic line a template puts under each, and nothing written. */
const template = [
  "# Session Title",
  "_A few words naming what the session is about_",
  "",
  "# Current State",
  "_What is being done right now, and what comes next_",
  "",
  "# Errors & Corrections",
  "*What went wrong and how it was fixed*",
  ""
].join("\n")

const summaryEntryText = (path: string) =>
  Effect.map(ResumeLoader.load(path), (view) => Live.textOf(view.messages[0]!))

describe("session-memory compaction's summary", () => {
  it.scoped("declines an empty summary.md", () =>
    Effect.gen(function*() {
      const s = yield* stored(60)
      Fs.writeFileSync(s.summaryFile, "  \n\n")
      const outcome = yield* s.pass()
      expect(outcome._tag === "Declined" && outcome.reason._tag).toBe("NoSummary")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("declines a template-only summary.md", () =>
    Effect.gen(function*() {
      const s = yield* stored(60)
      Fs.writeFileSync(s.summaryFile, template)
      const outcome = yield* s.pass()
      expect(outcome).toEqual(Compaction.Outcome.Declined({
        pass: "memory",
        reason: SessionMemoryCompaction.Declined.TemplateOnly({ path: s.summaryFile })
      }))
      // One line written under a heading makes it a summary.
      Fs.writeFileSync(s.summaryFile, template.replace("# Current State\n", "# Current State\nFixing the parser.\n"))
      expect((yield* s.pass())._tag).toBe("Compacted")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("truncates a section over 2,000 tokens at a line boundary, as the CLI does", () =>
    Effect.gen(function*() {
      const s = yield* stored(60)
      const long = Array.from({ length: 400 }, (_, i) => `- step ${i}: ${"y".repeat(60)}`)
      Fs.writeFileSync(s.summaryFile, ["# Worklog", ...long, "# Current State", "Fixing the parser."].join("\n"))
      const outcome = yield* s.pass()
      expect(outcome._tag).toBe("Compacted")
      const text = yield* summaryEntryText(s.path)
      expect(text).toContain(SessionMemoryCompaction.truncationNote)
      expect(text).toContain("# Current State\nFixing the parser.")
      const worklog = text.slice(text.indexOf("# Worklog"), text.indexOf(SessionMemoryCompaction.truncationNote))
      expect(worklog.length).toBeLessThanOrEqual("# Worklog\n".length + SessionMemoryCompaction.maxSectionChars)
      expect(worklog.length).toBeGreaterThan(SessionMemoryCompaction.maxSectionChars - 80)
      // Whole lines only.
      expect(worklog.trimEnd().split("\n").slice(1).every((line) => /^- step \d+: y{60}$/.test(line))).toBe(true)
      expect(text).not.toContain("step 399")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("keeps every message written after the last summary.md update in the window", () =>
    Effect.gen(function*() {
      const s = yield* stored(150)
      Fs.writeFileSync(s.summaryFile, "# Current State\nQuestions 0 to 39 were answered.\n")
      // The summary was last written from the session as it stood after answer 39.
      yield* SummaryCoverage.write(s.summaryFile, s.uuids[79]!)
      const outcome = yield* s.pass()
      expect(outcome._tag).toBe("Compacted")
      if (outcome._tag !== "Compacted") return
      expect(outcome.retainedEntries).toBe(300 - 80)
      const view = yield* ResumeLoader.load(s.path)
      const texts = view.messages.map(Live.textOf).join("\n")
      expect(texts).toContain("question 40:")
      expect(texts).not.toContain("answer 39:")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("declines when the message the summary covers is no longer in the session", () =>
    Effect.gen(function*() {
      const s = yield* stored(60)
      Fs.writeFileSync(s.summaryFile, "# Current State\nAll questions were answered.\n")
      yield* SummaryCoverage.write(s.summaryFile, randomUUID())
      const outcome = yield* s.pass()
      expect(outcome._tag === "Declined" && outcome.reason._tag).toBe("CoveredMessageMissing")
    }).pipe(Effect.provide(NodeContext.layer)))
})
