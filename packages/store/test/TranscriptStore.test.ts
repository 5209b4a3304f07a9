import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, layer } from "@effect/vitest"
import { TranscriptLayout, TranscriptStore } from "@skein/store"
import type { Scope } from "effect"
import { Effect, Layer, Option } from "effect"
import * as Path from "node:path"

const sessionId = "11111111-2222-4333-8444-555555555555"
const cwd = "/work/some project"

const user = (uuid: string, parentUuid: string | null, text: string) => ({
  type: "user",
  uuid,
  parentUuid,
  isSidechain: false,
  sessionId,
  timestamp: "2026-01-01T00:00:00.000Z",
  cwd,
  message: { role: "user", content: text }
})

const assistant = (uuid: string, parentUuid: string, text: string) => ({
  type: "assistant",
  uuid,
  parentUuid,
  isSidechain: false,
  sessionId,
  timestamp: "2026-01-01T00:00:01.000Z",
  cwd,
  message: {
    id: `msg_${uuid}`,
    type: "message",
    role: "assistant",
    model: "claude-test",
    content: [{ type: "text", text }],
    stop_reason: "end_turn",
    stop_sequence: null,
    usage: { input_tokens: 1, output_tokens: 1 }
  }
})

const queued = { type: "queue-operation", operation: "enqueue", timestamp: "2026-01-01T00:00:00.000Z", sessionId }

/** A fresh config root per test, with the store over it. */
const withStore = <A, E>(
  f: (ctx: { readonly root: string; readonly store: TranscriptStore.TranscriptStore["Type"] }) => Effect.Effect<A, E, FileSystem.FileSystem | Scope.Scope>
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const root = yield* fs.makeTempDirectoryScoped({ prefix: "skein-ts-" })
    const store = yield* TranscriptStore.make.pipe(Effect.provide(TranscriptLayout.layer(root)))
    return yield* f({ root, store })
  })

const mode = (path: string) =>
  Effect.map(Effect.flatMap(FileSystem.FileSystem, (fs) => fs.stat(path)), (info) => info.mode & 0o777)

const lines = (path: string) =>
  Effect.map(Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFileString(path)), (text) =>
    text.split("\n").filter((line) => line.length > 0).map((line): unknown => JSON.parse(line)))

const typesOf = (values: ReadonlyArray<unknown>) =>
  values.map((value) => typeof value === "object" && value !== null && "type" in value ? value.type : undefined)

layer(Layer.mergeAll(NodeContext.layer))("TranscriptStore", (it) => {
  describe("writer", () => {
    it.scoped("creates the file lazily, at the first user entry, with 0600 and 0700", () =>
      withStore(({ store }) =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          const paths = store.layout.session(cwd, sessionId)
          // A session that only initialized leaves nothing behind.
          yield* Effect.scoped(Effect.gen(function*() {
            const writer = yield* store.open({ cwd, sessionId })
            yield* writer.append(queued)
            yield* writer.append(TranscriptStore.customTitle(sessionId, "early"))
            expect(yield* writer.created).toBe(false)
          }))
          expect(yield* fs.exists(paths.transcript)).toBe(false)
          expect(yield* fs.exists(paths.projectDir)).toBe(false)

          yield* Effect.scoped(Effect.gen(function*() {
            const writer = yield* store.open({ cwd, sessionId, reAppendOnClose: false })
            yield* writer.append(queued)
            expect(yield* fs.exists(paths.transcript)).toBe(false)
            yield* writer.append(user("u1", null, "hello"))
            expect(yield* writer.created).toBe(true)
          }))
          // The entries that waited come first, in order.
          expect(typesOf(yield* lines(paths.transcript))).toEqual(["queue-operation", "user"])
          expect(yield* mode(paths.transcript)).toBe(0o600)
          expect(yield* mode(paths.projectDir)).toBe(0o700)
        })
      ))

    it.scoped("refuses a second writer of the same session while the first is open", () =>
      withStore(({ store }) =>
        Effect.gen(function*() {
          yield* store.open({ cwd, sessionId })
          const second = yield* Effect.flip(Effect.scoped(store.open({ cwd, sessionId })))
          expect(second._tag).toBe("TranscriptWriterBusy")
        })
      ))

    it.scoped("serializes concurrent appends: every line whole, none lost", () =>
      withStore(({ store }) =>
        Effect.gen(function*() {
          const paths = store.layout.session(cwd, sessionId)
          yield* Effect.scoped(Effect.gen(function*() {
            const writer = yield* store.open({ cwd, sessionId, fsync: TranscriptStore.batched({ entries: 16, interval: "1 second" }) })
            yield* writer.append(user("root", null, "start"))
            yield* Effect.forEach(
              Array.from({ length: 200 }, (_, i) => i),
              (i) => writer.append(user(`u${i}`, "root", `${i} ${"y".repeat(i * 50)}`)),
              { concurrency: "unbounded" }
            )
          }))
          const result = yield* TranscriptStore.read(paths.transcript)
          expect(result.diagnostics).toEqual([])
          expect(result.entries.filter((entry) => entry.type === "user")).toHaveLength(201)
        })
      ))

    it.scoped("re-appends the latest metadata at the tail, where the tail scan finds it", () =>
      withStore(({ store }) =>
        Effect.gen(function*() {
          const paths = store.layout.session(cwd, sessionId)
          yield* Effect.scoped(Effect.gen(function*() {
            const writer = yield* store.open({ cwd, sessionId })
            yield* writer.append(user("u0", null, "first prompt"))
            yield* writer.append(TranscriptStore.customTitle(sessionId, "old title"))
            yield* writer.append(TranscriptStore.customTitle(sessionId, "my title"))
            yield* writer.append(TranscriptStore.tag(sessionId, "wip"))
            yield* writer.append(TranscriptStore.mode(sessionId, "plan"))
            yield* writer.append(TranscriptStore.agentName(sessionId, "helper"))
            yield* writer.append(TranscriptStore.costState(sessionId, { totalCostUSD: 0.25, totalAPIDuration: 10 }))
            yield* writer.append(TranscriptStore.lastPrompt(sessionId, "first prompt", "a0"))
            // Bury it all under 200 KB of conversation.
            let parent = "u0"
            for (let i = 0; i < 50; i++) {
              yield* writer.append(assistant(`a${i}`, parent, "z".repeat(4000)))
              parent = `a${i}`
            }
            const buried = yield* TranscriptStore.tailScan(paths.transcript)
            expect(buried.customTitle).toBeUndefined()
            expect(buried.scannedBytes).toBe(TranscriptStore.defaultTailScanBytes)

            yield* writer.reAppendMetadata
            const found = yield* TranscriptStore.tailScan(paths.transcript)
            expect(found).toMatchObject({
              customTitle: "my title",
              tag: "wip",
              mode: "plan",
              agentName: "helper",
              lastPrompt: "first prompt",
              leafUuid: "a0"
            })
            expect(found.costState?.totalCostUSD).toBe(0.25)
            expect(found.scannedBytes).toBe(TranscriptStore.defaultTailScanBytes)

            // Nothing new since: a second re-append writes nothing.
            const before = (yield* lines(paths.transcript)).length
            yield* writer.reAppendMetadata
            expect((yield* lines(paths.transcript)).length).toBe(before)
            yield* writer.append(assistant("late", parent, "z".repeat(70_000)))
          }))
          // Closing the writer re-appended once more, after the late entry.
          const closed = yield* TranscriptStore.tailScan(paths.transcript)
          expect(closed.customTitle).toBe("my title")
          expect(typesOf(yield* lines(paths.transcript)).slice(-6)).toEqual(
            TranscriptStore.metadataTypes.filter((type) => type !== "ai-title")
          )
        })
      ))

    it.scoped("a reopened writer knows the metadata of the file's tail", () =>
      withStore(({ store }) =>
        Effect.gen(function*() {
          const paths = store.layout.session(cwd, sessionId)
          yield* Effect.scoped(Effect.gen(function*() {
            const writer = yield* store.open({ cwd, sessionId })
            yield* writer.append(user("u0", null, "hi"))
            yield* writer.append(TranscriptStore.aiTitle(sessionId, "a title"))
          }))
          yield* Effect.scoped(Effect.gen(function*() {
            const writer = yield* store.open({ cwd, sessionId })
            expect(writer.repairs).toEqual([])
            const metadata = yield* writer.metadata
            expect(metadata.get("ai-title")).toMatchObject({ aiTitle: "a title" })
            yield* writer.append(assistant("a0", "u0", "x".repeat(100_000)))
          }))
          expect((yield* TranscriptStore.tailScan(paths.transcript)).aiTitle).toBe("a title")
        })
      ))
  })

  describe("crash safety", () => {
    it.scoped("cuts a torn last line on open, with a diagnostic, and appends after it", () =>
      withStore(({ store }) =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          const paths = store.layout.session(cwd, sessionId)
          yield* fs.makeDirectory(paths.projectDir, { recursive: true })
          const good = `${JSON.stringify(user("u0", null, "kept"))}\n`
          yield* fs.writeFileString(paths.transcript, `${good}{"type":"user","uuid":"u1","mess`)
          yield* Effect.scoped(Effect.gen(function*() {
            const writer = yield* store.open({ cwd, sessionId, reAppendOnClose: false })
            expect(writer.repairs).toEqual([
              expect.objectContaining({ _tag: "TornTail", reason: "NoNewline", offset: good.length, bytes: 32 })
            ])
            yield* writer.append(user("u2", "u0", "after"))
          }))
          const result = yield* TranscriptStore.read(paths.transcript)
          expect(result.diagnostics).toEqual([])
          expect(result.entries.map((entry) => "uuid" in entry ? entry.uuid : "")).toEqual(["u0", "u2"])

          // A complete last line that is not JSON is cut too.
          yield* fs.writeFileString(paths.transcript, `${good}not json at all\n`)
          yield* Effect.scoped(Effect.gen(function*() {
            const writer = yield* store.open({ cwd, sessionId, reAppendOnClose: false })
            expect(writer.repairs.map((repair) => repair.reason)).toEqual(["InvalidJson"])
          }))
          expect(yield* fs.readFileString(paths.transcript)).toBe(good)

          // A file that is one torn line becomes empty.
          yield* fs.writeFileString(paths.transcript, `{"type":"us`)
          yield* Effect.scoped(Effect.gen(function*() {
            const writer = yield* store.open({ cwd, sessionId, reAppendOnClose: false })
            expect(writer.repairs.map((repair) => [repair.offset, repair.reason])).toEqual([[0, "NoNewline"]])
          }))
          expect(yield* fs.readFileString(paths.transcript)).toBe("")
        })
      ))

    it.scoped("reading skips malformed lines with diagnostics and never fails", () =>
      withStore(({ store }) =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          const paths = store.layout.session(cwd, sessionId)
          yield* fs.makeDirectory(paths.projectDir, { recursive: true })
          yield* fs.writeFileString(
            paths.transcript,
            [
              JSON.stringify(user("u0", null, "one")),
              "{broken",
              JSON.stringify({ type: "user", uuid: 5 }),
              JSON.stringify({ type: "atis-latch", atis: "" }),
              "[1,2]",
              JSON.stringify(assistant("a0", "u0", "two")),
              `{"type":"assistant","torn`
            ].join("\n")
          )
          const result = yield* TranscriptStore.read(paths.transcript)
          expect(result.entries.map((entry) => entry.type)).toEqual(["user", "assistant"])
          expect(result.unknown.map((unknown) => unknown.type)).toEqual(["atis-latch"])
          expect(result.diagnostics.map((d) => [d._tag, d.line])).toEqual([
            ["Unparseable", 2],
            ["Malformed", 3],
            ["Unparseable", 5],
            ["Unparseable", 7]
          ])
          const missing = yield* Effect.flip(TranscriptStore.read(Path.join(paths.projectDir, "nope.jsonl")))
          expect(missing._tag).toBe("TranscriptNotFound")
        })
      ))
  })

  describe("sidechains", () => {
    it.scoped("a subagent transcript and its meta round-trip, out of the main chain", () =>
      withStore(({ store }) =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          const paths = store.layout.session(cwd, sessionId)
          yield* Effect.scoped(Effect.gen(function*() {
            const main = yield* store.open({ cwd, sessionId })
            yield* main.append(user("u0", null, "main prompt"))
            const side = yield* store.openSidechain({
              cwd,
              sessionId,
              agentId: "a1b2c3d4",
              meta: { agentType: "general-purpose", description: "look around" }
            })
            yield* side.append({ ...user("s0", null, "sub prompt"), isSidechain: true, agentId: "a1b2c3d4" })
            yield* side.append({ ...assistant("s1", "s0", "sub answer"), isSidechain: true, agentId: "a1b2c3d4" })
          }))
          const { meta, transcript } = yield* store.readSidechain(cwd, sessionId, "a1b2c3d4")
          expect(Option.getOrThrow(meta)).toEqual({ agentType: "general-purpose", description: "look around" })
          expect(transcript.entries.map((entry) => "uuid" in entry ? entry.uuid : "")).toEqual(["s0", "s1"])
          expect(transcript.entries.every((entry) => "isSidechain" in entry && entry.isSidechain)).toBe(true)

          const main = yield* store.read(cwd, sessionId)
          expect(main.entries.map((entry) => "uuid" in entry ? entry.uuid : entry.type)).toEqual(["u0"])
          expect(yield* TranscriptStore.listSubagents(paths)).toEqual(["a1b2c3d4"])
          const sub = paths.subagent("a1b2c3d4")
          expect(yield* mode(sub.transcript)).toBe(0o600)
          expect(yield* mode(sub.meta)).toBe(0o600)
          expect(yield* mode(paths.subagentsDir)).toBe(0o700)
          expect(yield* mode(paths.sessionDir)).toBe(0o700)
          expect(yield* fs.exists(sub.transcript)).toBe(true)
        })
      ))
  })
})
