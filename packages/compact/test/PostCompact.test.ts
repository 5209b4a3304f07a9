/**
 * Pass 2's preparation (placeholders, stripped skill listings), what it
 * restores after the boundary (recent files, plan, tasks) and the
 * discovered tools the boundary records — checked against a transcript the
 * real CLI (2.1.332) wrote around its own `/compact` after a `Read`.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { type Lenient, Transcript } from "@skein/protocol"
import { ResumeLoader, TranscriptLayout } from "@skein/store"
import { ClaudeCli } from "@skein/testkit"
import { Effect, Option, Schema } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CompactPreparation from "../src/CompactPreparation.js"
import * as Compaction from "../src/Compaction.js"
import * as PostCompactRestore from "../src/PostCompactRestore.js"
import * as Live from "./live.js"

const fixture = Path.join(import.meta.dirname, "fixtures", "cli-compact-read.transcript.jsonl")
const fixtureCwd = "/tmp/cap12/run-lY5WiV/cwd"
const fixtureLines = Fs.readFileSync(fixture, "utf8").trimEnd().split("\n")
const isChainEntry = Schema.is(Schema.Union(Transcript.UserEntry, Transcript.AssistantEntry, Transcript.AttachmentEntry, Transcript.SystemEntry))

let n = 0
const base = () => ({ uuid: `u${++n}`, parentUuid: null, isSidechain: false, sessionId: "s", timestamp: "2026-12-01T00:00:00.000Z" })
/** A user entry as decoded from a line (unknown fields and blocks kept, as the store keeps them). */
const user = (content: unknown, extra: Record<string, unknown> = {}): Transcript.ChainEntry =>
  decodeUser({ ...base(), type: "user", message: { role: "user", content }, ...extra })
const decodeUser = Schema.decodeUnknownSync(Transcript.UserEntry, { onExcessProperty: "preserve" })
const attachment = (body: { readonly type: string } & Record<string, unknown>): Transcript.ChainEntry => ({
  ...base(),
  type: "attachment",
  attachment: body
})
const assistant = (content: Transcript.AssistantEntry["message"]["content"]): Transcript.ChainEntry => ({
  ...base(),
  type: "assistant",
  message: {
    id: `m${n}`,
    type: "message",
    role: "assistant",
    model: "m",
    content,
    stop_reason: "end_turn",
    stop_sequence: null,
    usage: { input_tokens: 1, output_tokens: 1 }
  }
})
const png = { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } } as const
const pdf = { type: "document", source: { type: "base64", media_type: "application/pdf", data: "JVBERi0=" } } as const
const read = (path: string) =>
  user([{ type: "tool_result", tool_use_id: `t${n}`, content: "1\tx" }], { toolUseResult: { type: "text", file: { filePath: path, content: "x" } } })

describe("CompactPreparation", () => {
  it("turns images and documents into placeholders, in prompts, tool results and file attachments", () => {
    const entries = [
      user([{ type: "text", text: "look" }, png, pdf]),
      user([{ type: "tool_result", tool_use_id: "t", content: [{ type: "text", text: "shot" }, png] }]),
      attachment({ type: "file", filename: "/a.png", content: { type: "image", file: { base64: "..." } } }),
      user("plain")
    ]
    const prepared = CompactPreparation.prepare(entries)
    expect(prepared.placeholders).toBe(3)
    expect(CompactPreparation.changed(prepared)).toBe(true)
    const [first, second, file, plain] = prepared.entries
    expect(first?.type === "user" && first.message.content).toEqual([{ type: "text", text: "look" }, { type: "text", text: "[image]" }, {
      type: "text",
      text: "[document]"
    }])
    expect(second?.type === "user" && second.message.content).toEqual([{
      type: "tool_result",
      tool_use_id: "t",
      content: [{ type: "text", text: "shot" }, { type: "text", text: "[image]" }]
    }])
    expect(file?.type === "attachment" && file.attachment).toEqual({
      type: "file",
      filename: "/a.png",
      content: { type: "text", file: { filePath: "/a.png", content: "[image]", numLines: 1, startLine: 1, totalLines: 1 } }
    })
    expect(plain).toBe(entries[3])
  })

  it("strips skill-discovery attachments and leaves every other entry as it was", () => {
    const entries = [user("hi"), attachment({ type: "skill_listing", content: "- pdf: read PDFs" }), attachment({ type: "date", date: "x" })]
    const prepared = CompactPreparation.prepare(entries)
    expect(prepared).toEqual({ entries: [entries[0], entries[2]], placeholders: 0, stripped: 1 })
    expect(CompactPreparation.changed(CompactPreparation.prepare([user("hi")]))).toBe(false)
  })

  it("collects the discovered deferred tools: tool_reference results and the previous boundary's, sorted", () => {
    const entries = [
      user([{ type: "tool_result", tool_use_id: "t", content: [{ type: "tool_reference", tool_name: "WebFetch" }] }]),
      user([{ type: "tool_result", tool_use_id: "u", content: "no reference" }])
    ]
    const boundary: Transcript.SystemEntry = {
      ...base(),
      type: "system",
      subtype: "compact_boundary",
      compactMetadata: { trigger: "auto", preTokens: 1, ...{ preCompactDiscoveredTools: ["NotebookEdit", "WebFetch"] } }
    }
    expect(CompactPreparation.discoveredTools(entries, Option.some(boundary))).toEqual(["NotebookEdit", "WebFetch"])
    expect(CompactPreparation.discoveredTools([user("x")], Option.none())).toEqual([])
  })
})

describe("PostCompactRestore.select", () => {
  it("takes the 5 most recently read files, once each, not those the window read again, nor excluded ones", () => {
    const dropped = ["/a", "/b", "/c", "/a", "/d", "/e", "/f", "/g", "/memory", "/w"].map(read)
    const window = [read("/w")]
    const selection = PostCompactRestore.select({ dropped, window, exclude: ["/memory"] })
    expect(selection.files).toEqual(["/g", "/f", "/e", "/d", "/a"])
  })

  it("finds the latest plan (ExitPlanMode, or an earlier plan reference) and the tasks still running", () => {
    const slugged = user("go", { slug: "brave-new-plan" })
    const dropped = [
      slugged,
      assistant([{ type: "tool_use", id: "p", name: "ExitPlanMode", input: { plan: "1. read\n2. write" } }]),
      attachment({ type: "task_status", taskId: "a1", status: "running", description: "build" }),
      attachment({ type: "task_status", taskId: "a2", status: "running", description: "test" }),
      attachment({ type: "task_status", taskId: "a2", status: "completed", description: "test" })
    ]
    const selection = PostCompactRestore.select({ dropped, window: [], plansDir: "/config/plans" })
    expect(selection.plan).toEqual(Option.some({ path: "/config/plans/brave-new-plan.md", content: "1. read\n2. write" }))
    expect(selection.tasks).toEqual([{ type: "task_status", taskId: "a1", status: "running", description: "build" }])
  })
})

describe("PostCompactRestore.restore", () => {
  it.scoped("reads the files again, skips one over 5,000 tokens, and stops at the 50,000-token budget", () =>
    Effect.gen(function*() {
      const d = yield* ClaudeCli.offlineDirs("skein-restore-")
      const file = (name: string, chars: number) => {
        const path = Path.join(d.cwd, name)
        Fs.writeFileSync(path, "x".repeat(chars))
        return path
      }
      const small = file("small.txt", 4)
      const huge = file("huge.txt", 5_001 * 4)
      const mid = [1, 2, 3].map((i) => file(`mid${i}.txt`, 4_000 * 4))
      const restored = yield* PostCompactRestore.restore(
        { files: [small, huge, ...mid, Path.join(d.cwd, "gone.txt")], plan: Option.none(), tasks: [] },
        { cwd: d.cwd, maxTokens: 9_000 }
      )
      const names = restored.map((r) => Path.basename(String((r["attachment"] as Lenient.JsonObject)["filename"])))
      expect(names).toEqual(["small.txt", "mid1.txt", "mid2.txt"])
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("pass 2's restore, as the CLI writes it", () => {
  it.scoped("after the boundary, a file read before it comes back in the CLI's own attachment form; the view loads", () =>
    Effect.gen(function*() {
      const d = yield* ClaudeCli.offlineDirs("skein-restore-")
      const cwd = Fs.realpathSync(d.cwd)
      const notes = Path.join(cwd, "notes.txt")
      Fs.writeFileSync(notes, "line one of the notes\nline two of the notes\n")
      const lines = fixtureLines.map((line) => line.replaceAll(fixtureCwd, cwd))
      const cliFile = JSON.parse(lines[20]!)
      const sessionId = cliFile.sessionId
      const path = TranscriptLayout.make(d.configDir).session(cwd, sessionId).transcript
      Fs.mkdirSync(Path.dirname(path), { recursive: true })
      // The session up to its first turn's end, before the CLI's own /compact.
      Fs.writeFileSync(path, lines.slice(0, 12).join("\n") + "\n", { mode: 0o600 })

      const outcome = yield* Compaction.compactWith({
        cwd,
        sessionId,
        summary: "The notes were read.",
        pass: "summarize",
        window: { minTokens: 1, minTextMessages: 1 },
        restore: {}
      }).pipe(Effect.provide(Live.storeLayer(d.configDir)))
      expect(outcome._tag).toBe("Compacted")

      const written = Fs.readFileSync(path, "utf8").trimEnd().split("\n").slice(12).map((l) => JSON.parse(l))
      // The writer then re-appends the latest metadata (here the same last-prompt) for tail scans.
      expect(written.map((e) => e.type).slice(0, 4)).toEqual(["system", "user", "attachment", "last-prompt"])
      expect(written.slice(4).every((e) => e.type !== "user" && e.type !== "assistant" && e.type !== "attachment")).toBe(true)
      const [boundary, summary, file] = written
      const lastPrompt = written.filter((e) => e.type === "last-prompt").at(-1)
      expect(summary.parentUuid).toBe(boundary.uuid)
      expect(file.parentUuid).toBe(summary.uuid)
      expect(lastPrompt.leafUuid).toBe(file.uuid)
      // The CLI's own entry, field for field (but its per-session extras), and ours.
      expect(file.attachment).toEqual(cliFile.attachment)
      expect(file.rendered).toEqual(cliFile.rendered)
      expect(file.renderedRole).toBe(cliFile.renderedRole)
      const chainFields = (e: Record<string, unknown>) => Object.keys(e).filter((k) => k !== "slug").sort()
      expect(chainFields(file)).toEqual(chainFields(cliFile))

      const view = yield* ResumeLoader.load(path).pipe(Effect.provide(NodeContext.layer))
      expect(view.entries.map((e) => e.type)).toEqual(["system", "user", "assistant", "attachment"])
      expect(view.leafUuid).toBe(file.uuid)
      expect(view.messages.map(Live.textOf).join("\n")).not.toContain("please read the notes")
      expect(view.diagnostics.filter((x) => x._tag === "Orphan" || x._tag === "LeafNotFound")).toEqual([])
      expect(fixtureLines.every((l) => l.startsWith("{"))).toBe(true)
      expect(isChainEntry(JSON.parse(fixtureLines[20]!))).toBe(true)
    }))
})
