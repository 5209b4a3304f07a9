import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { expect, it, layer } from "@effect/vitest"
import { ExtractionCursor } from "@skein/memory"
import { Transcript } from "@skein/protocol"
import { Effect, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"

const base = (uuid: string) => ({ uuid, parentUuid: null, isSidechain: false, sessionId: "s1", timestamp: "2026-01-01T00:00:00Z" })
const user = (uuid: string, text: string, extra: object = {}): Transcript.UserEntry =>
  Schema.decodeUnknownSync(Transcript.UserEntry)({ ...base(uuid), type: "user", message: { role: "user", content: text }, ...extra })
const assistant = (uuid: string, content: ReadonlyArray<object>): Transcript.AssistantEntry =>
  Schema.decodeUnknownSync(Transcript.AssistantEntry)({
    ...base(uuid),
    type: "assistant",
    message: { id: `m-${uuid}`, type: "message", role: "assistant", model: "m", content, stop_reason: "end_turn", stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } }
  })
const boundary = (uuid: string): Transcript.Entry =>
  Schema.decodeUnknownSync(Transcript.SystemEntry)({ ...base(uuid), type: "system", subtype: "compact_boundary", compactMetadata: { trigger: "auto", preTokens: 100 } })
const text = (t: string) => [{ type: "text", text: t }]
const uuids = (p: ExtractionCursor.Pending) => p.messages.map((m) => m.uuid)

const chain = [user("u1", "hi"), assistant("a1", text("hello")), user("u2", "remember x"), assistant("a2", text("ok"))]

it("reads only what follows the cursor; without one, everything", () => {
  expect(ExtractionCursor.pending(chain, Option.some("a1"))).toEqual({ messages: chain.slice(2), from: "cursor" })
  expect(uuids(ExtractionCursor.pending(chain, Option.none()))).toEqual(["u1", "a1", "u2", "a2"])
  expect(ExtractionCursor.pending(chain, Option.some("a2")).messages).toEqual([])
  // Meta user messages and sidechain entries are not conversation.
  const noisy = [...chain, user("m1", "<meta>", { isMeta: true }), user("sc", "side", { isSidechain: true }), user("u3", "more")]
  expect(uuids(ExtractionCursor.pending(noisy, Option.some("a2")))).toEqual(["u3"])
})

it("a cursor compacted away, or missing, counts from the last boundary: never stalls, never re-reads the summarized part", () => {
  const compacted = [...chain, boundary("b1"), user("sum", "summary", { isCompactSummary: true }), user("u3", "next"), assistant("a3", text("fine"))]
  expect(ExtractionCursor.pending(compacted, Option.some("a1"))).toMatchObject({ from: "boundary" })
  expect(uuids(ExtractionCursor.pending(compacted, Option.some("a1")))).toEqual(["sum", "u3", "a3"])
  expect(uuids(ExtractionCursor.pending(compacted, Option.some("gone")))).toEqual(["sum", "u3", "a3"])
  expect(ExtractionCursor.pending(compacted, Option.some("u3"))).toMatchObject({ from: "cursor" })
  expect(uuids(ExtractionCursor.pending(compacted, Option.some("u3")))).toEqual(["a3"])
})

it("notices the main agent writing memory itself (relative or absolute paths), and nothing else", () => {
  const dir = "/c/projects/-p/memory"
  const write = (file_path: string) => [assistant("w", [{ type: "tool_use", id: "t1", name: "Write", input: { file_path, content: "x" } }])]
  expect(ExtractionCursor.wroteMemory(write(`${dir}/a.md`), dir, "/p")).toBe(true)
  expect(ExtractionCursor.wroteMemory(write("../c/projects/-p/memory/MEMORY.md"), dir, "/p")).toBe(true)
  expect(ExtractionCursor.wroteMemory(write("/p/src/a.ts"), dir, "/p")).toBe(false)
  expect(ExtractionCursor.wroteMemory(chain.filter((e): e is ExtractionCursor.Message => e.type === "assistant"), dir, "/p")).toBe(false)
})

layer(NodeContext.layer)("ExtractionCursor files", (it) => {
  it.scoped("the cursor survives a restart: saved beside the transcript, loaded back; a corrupt file is no cursor", () =>
    Effect.gen(function*() {
      const projectDir = yield* Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "skein-cursor-" }))
      const file = ExtractionCursor.file(projectDir, "s1")
      expect(file).toBe(path.join(projectDir, "s1", "memory-cursor.json"))
      expect(yield* ExtractionCursor.load(file)).toEqual(Option.none())
      yield* ExtractionCursor.save(file, "a2")
      expect(JSON.parse(fs.readFileSync(file, "utf8"))).toEqual({ lastMemoryMessageUuid: "a2" })
      expect(yield* ExtractionCursor.load(file)).toEqual(Option.some("a2"))
      fs.writeFileSync(file, "{oops")
      expect(yield* ExtractionCursor.load(file)).toEqual(Option.none())
    }))
})
