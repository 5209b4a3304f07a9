/**
 * SessionIndex's internal units alone: the head scan over a transcript's
 * first lines, which session a query names, and the live marker's scoped
 * lifetime.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it, layer } from "@effect/vitest"
import type { SessionIndex } from "@skein/store"
import { Effect } from "effect"
import * as Path from "node:path"
import { headScan } from "../src/internal/headScan.js"
import * as SessionMarks from "../src/internal/sessionMarks.js"
import * as SessionQuery from "../src/internal/sessionQuery.js"
import * as E from "./fixtures/entries.js"

const tempFile = (text: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = yield* fs.makeTempDirectoryScoped({ prefix: "skein-index-units-" })
    const path = Path.join(dir, "session.jsonl")
    yield* fs.writeFileString(path, text)
    return { dir, path }
  })

layer(NodeContext.layer)("SessionIndex units", (it) => {
  it.scoped("the first prompt a person typed: not meta, not a compact summary, not a command echo", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const { path } = yield* tempFile(E.jsonl([
        "not json",
        { type: "queue-operation", operation: "enqueue" },
        { ...E.user("m1", null, "injected context"), isMeta: true, cwd: "/work/first", gitBranch: "topic" },
        E.summary("s1", "m1"),
        E.user("c1", "s1", "<command-name>/compact</command-name>"),
        E.user("u0", "c1", "   "),
        E.user("u1", "u0", [{ type: "image" }, { type: "text", text: "the real prompt" }]),
        E.user("u2", "u1", "a later prompt")
      ]))
      expect(yield* headScan(fs, path)).toEqual({ firstPrompt: "the real prompt", cwd: "/work/first", gitBranch: "topic" })
    }))

  it.scoped("a line split across read blocks is whole; nothing past 4 MiB is read", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const split = yield* tempFile(E.jsonl([E.blob("x".repeat(100 * 1024)), E.user("u1", null, "after a long line")]))
      expect((yield* headScan(fs, split.path)).firstPrompt).toBe("after a long line")
      const far = yield* tempFile(E.jsonl([
        ...Array.from({ length: 5 }, () => E.blob("y".repeat(1024 * 1024))),
        E.user("u1", null, "too far")
      ]))
      expect(yield* headScan(fs, far.path)).toEqual({ firstPrompt: undefined, cwd: undefined, gitBranch: undefined })
    }))

  it.scoped("a live marker is removed when its scope closes, unless another process took it over", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const { dir: root } = yield* tempFile("")
      const marker = Path.join(root, "skein", "live", "s1.json")
      yield* Effect.scoped(Effect.gen(function*() {
        yield* SessionMarks.markLive(fs, root, { sessionId: "s1", pid: 4242, cwd: "/work" })
        expect(JSON.parse(yield* fs.readFileString(marker))).toMatchObject({ pid: 4242, sessionId: "s1", cwd: "/work" })
      }))
      expect(yield* fs.exists(marker)).toBe(false)
      yield* Effect.scoped(Effect.gen(function*() {
        yield* SessionMarks.markLive(fs, root, { sessionId: "s1", pid: 4242 })
        yield* fs.writeFileString(marker, JSON.stringify({ pid: 5151, sessionId: "s1", startedAt: 0 }))
      }))
      expect(JSON.parse(yield* fs.readFileString(marker))).toMatchObject({ pid: 5151 })
    }))

  it.scoped("marks are read back by session id; other JSON in the folder is skipped", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const { dir: root } = yield* tempFile("")
      yield* SessionMarks.writeMark(fs, root, { sessionId: "w1", kind: "worker", parentSessionId: "p1", createdAt: 1 })
      yield* fs.writeFileString(Path.join(SessionMarks.marksDir(root), "junk.json"), JSON.stringify({ kind: "other" }))
      const marks = yield* SessionMarks.readMarks(fs, root)
      expect([...marks]).toEqual([["w1", { sessionId: "w1", kind: "worker", parentSessionId: "p1", createdAt: 1 }]])
    }))
})

const info = (sessionId: string, overrides: Partial<SessionIndex.SessionInfo> = {}): SessionIndex.SessionInfo => ({
  sessionId,
  path: `/root/projects/-work/${sessionId}.jsonl`,
  projectDir: "/root/projects/-work",
  title: undefined,
  titleSource: undefined,
  customTitle: undefined,
  aiTitle: undefined,
  firstPrompt: undefined,
  lastPrompt: undefined,
  tag: undefined,
  cwd: "/work",
  gitBranch: undefined,
  mtime: new Date(0),
  size: 0,
  messageCount: 0,
  live: false,
  ownerPid: undefined,
  mark: undefined,
  isWorker: false,
  ...overrides
})

describe("sessionQuery", () => {
  const all = [
    info("s3", { title: "Fix the Build", firstPrompt: "Fix the Build", titleSource: "first-prompt" }),
    info("s2", { title: "release notes", aiTitle: "release notes", titleSource: "ai-title" }),
    info("s1", { title: "fix the build", customTitle: "fix the build", titleSource: "custom-title" })
  ]

  it("an exact custom or AI title wins over a newer case-blind match of the shown title", () => {
    expect(SessionQuery.pick(all, { _tag: "Title", title: "fix the build" })?.sessionId).toBe("s1")
    expect(SessionQuery.pick(all, { _tag: "Title", title: "FIX THE BUILD" })?.sessionId).toBe("s3")
    expect(SessionQuery.pick(all, { _tag: "Title", title: "release notes" })?.sessionId).toBe("s2")
    expect(SessionQuery.pick(all, { _tag: "Title", title: "nothing" })).toBeUndefined()
  })

  it("by id, and by path resolved", () => {
    expect(SessionQuery.pick(all, { _tag: "Id", sessionId: "s2" })?.sessionId).toBe("s2")
    expect(SessionQuery.pick(all, { _tag: "Path", path: "/root/projects/-work/../-work/s1.jsonl" })?.sessionId).toBe("s1")
  })

  it("typed text is tried as a path only when it looks like one, then as an id, then as a title", () => {
    expect(SessionQuery.candidates("my session").map((query) => query._tag)).toEqual(["Id", "Title"])
    expect(SessionQuery.candidates("s1.jsonl").map((query) => query._tag)).toEqual(["Path", "Id", "Title"])
    expect(SessionQuery.candidates("dir/s1").map((query) => query._tag)).toEqual(["Path", "Id", "Title"])
  })
})
