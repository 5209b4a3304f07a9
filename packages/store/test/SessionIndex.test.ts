import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import { SessionIndex, TranscriptLayout, TranscriptStore } from "@skein/store"
import { Deferred, Effect, Layer, Option } from "effect"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"

const cwd = "/home/dev/project"

const user = (sessionId: string, uuid: string, parentUuid: string | null, content: unknown, extra: object = {}) => ({
  type: "user",
  uuid,
  parentUuid,
  isSidechain: false,
  sessionId,
  timestamp: "2026-01-01T00:00:00.000Z",
  cwd,
  gitBranch: "main",
  message: { role: "user", content },
  ...extra
})

const assistant = (sessionId: string, uuid: string, parentUuid: string, text: string) => ({
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

/** Writes a session of `turns` question/answer pairs, plus `extra` entries, and sets its mtime. */
const writeSession = (
  store: TranscriptStore.TranscriptStore["Type"],
  sessionId: string,
  options: { readonly prompt: string; readonly turns: number; readonly extra?: ReadonlyArray<TranscriptStore.Entry>; readonly mtime: number }
) =>
  Effect.gen(function*() {
    yield* Effect.scoped(Effect.gen(function*() {
      const writer = yield* store.open({ cwd, sessionId })
      // Injected context comes before the typed prompt and is not the first prompt.
      yield* writer.append(user(sessionId, "meta", null, "<system-reminder>ctx</system-reminder>", { isMeta: true }))
      let parent = "meta"
      for (let i = 0; i < options.turns; i++) {
        yield* writer.append(user(sessionId, `u${i}`, parent, i === 0 ? [{ type: "text", text: options.prompt }] : `more ${i}`))
        yield* writer.append(assistant(sessionId, `a${i}`, `u${i}`, `answer ${i}`))
        parent = `a${i}`
      }
      yield* writer.appendAll(options.extra ?? [])
    }))
    const fs = yield* FileSystem.FileSystem
    const path = store.layout.session(cwd, sessionId).transcript
    yield* fs.utimes(path, options.mtime, options.mtime)
  })

const setup = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const root = yield* fs.makeTempDirectoryScoped({ prefix: "skein-index-" })
  const layout = TranscriptLayout.layer(root)
  const store = yield* TranscriptStore.make.pipe(Effect.provide(layout))
  const index = yield* SessionIndex.make.pipe(Effect.provide(layout))
  return { root, store, index }
})

/** A child process that lives until killed, to own a live marker. */
const sleeper = Effect.acquireRelease(
  Effect.gen(function*() {
    const child = ChildProcess.spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"], { stdio: "ignore" })
    const exited = yield* Deferred.make<void>()
    child.once("exit", () => Deferred.unsafeDone(exited, Effect.void))
    const pid = child.pid ?? -1
    return { pid, kill: Effect.zipRight(Effect.sync(() => child.kill("SIGKILL")), Deferred.await(exited)) }
  }),
  (child) => child.kill
)

describe("SessionIndex", () => {
  it.scopedLive("lists with titles, first prompts, counts and liveness; finds; continues past a live session", () =>
    Effect.gen(function*() {
      const { index, root, store } = yield* setup
      const t = Date.parse("2026-01-01T00:00:00Z") / 1000
      yield* writeSession(store, "s-old", {
        prompt: "old question",
        turns: 1,
        extra: [TranscriptStore.customTitle("s-old", "Custom one"), TranscriptStore.aiTitle("s-old", "ignored")],
        mtime: t
      })
      yield* writeSession(store, "s-mid", {
        prompt: "mid question",
        turns: 2,
        extra: [TranscriptStore.aiTitle("s-mid", "AI named")],
        mtime: t + 100
      })
      yield* writeSession(store, "s-new", { prompt: "newest question", turns: 3, mtime: t + 200 })
      yield* writeSession(store, "s-fork", { prompt: "forked", turns: 1, mtime: t + 300 })
      yield* index.markWorker("s-fork", { parentSessionId: "s-new", label: "explore" })

      const listed = yield* index.list({ cwd })
      expect(listed.map((info) => [info.sessionId, info.title, info.titleSource, info.messageCount])).toEqual([
        ["s-new", "newest question", "first-prompt", 7],
        ["s-mid", "AI named", "ai-title", 5],
        ["s-old", "Custom one", "custom-title", 3]
      ])
      const newest = listed[0]!
      expect(newest).toMatchObject({ firstPrompt: "newest question", cwd, gitBranch: "main", live: false, isWorker: false })
      expect(newest.mtime.getTime()).toBe((t + 200) * 1000)

      // Workers only when asked; every project when no cwd is given.
      const withWorkers = yield* index.list({ workers: true })
      expect(withWorkers[0]).toMatchObject({ sessionId: "s-fork", isWorker: true, mark: { parentSessionId: "s-new" } })

      // Lookup by id, title and path; `resolve` tries all three.
      const byId = yield* index.find({ _tag: "Id", sessionId: "s-mid" })
      expect(Option.map(byId, (info) => info.title)).toEqual(Option.some("AI named"))
      const byTitle = yield* index.find({ _tag: "Title", title: "Custom one" }, { cwd })
      expect(Option.map(byTitle, (info) => info.sessionId)).toEqual(Option.some("s-old"))
      const byPath = yield* index.resolve(store.layout.session(cwd, "s-new").transcript)
      expect(Option.map(byPath, (info) => info.sessionId)).toEqual(Option.some("s-new"))
      expect(Option.map(yield* index.resolve("newest QUESTION"), (info) => info.sessionId)).toEqual(Option.some("s-new"))
      expect(Option.isNone(yield* index.resolve("no such session"))).toBe(true)

      // `continue`: the newest session is held by a live process, so the next one is picked…
      expect(Option.map(yield* index.continueSession(cwd), (info) => info.sessionId)).toEqual(Option.some("s-new"))
      const owner = yield* sleeper
      yield* Effect.scoped(Effect.gen(function*() {
        yield* index.markLive({ sessionId: "s-new", cwd, pid: owner.pid })
        const live = yield* index.list({ cwd })
        expect(live[0]).toMatchObject({ sessionId: "s-new", live: true, ownerPid: owner.pid })
        expect(Option.map(yield* index.continueSession(cwd), (info) => info.sessionId)).toEqual(Option.some("s-mid"))

        // …and once its owner is dead, the stale marker no longer counts.
        yield* owner.kill
        expect(Option.map(yield* index.continueSession(cwd), (info) => info.sessionId)).toEqual(Option.some("s-new"))
      }))
      // Closing the scope removed the marker.
      const fs = yield* FileSystem.FileSystem
      expect(yield* fs.readDirectory(SessionIndex.liveDir(root))).toEqual([])

      // The CLI's own registry (`<root>/sessions/<pid>.json`) marks a session live too.
      const cliOwner = yield* sleeper
      yield* fs.makeDirectory(Path.join(root, "sessions"))
      yield* fs.writeFileString(
        Path.join(root, "sessions", `${cliOwner.pid}.json`),
        JSON.stringify({ pid: cliOwner.pid, sessionId: "s-new", cwd, startedAt: 0, kind: "interactive" })
      )
      expect(Option.map(yield* index.continueSession(cwd), (info) => info.sessionId)).toEqual(Option.some("s-mid"))
    }).pipe(Effect.provide(Layer.mergeAll(NodeContext.layer))))

  it.scopedLive("counts only what a transcript grew by, and sees re-appended titles", () =>
    Effect.gen(function*() {
      const { index, store } = yield* setup
      const t = Date.parse("2026-01-01T00:00:00Z") / 1000
      yield* writeSession(store, "s1", { prompt: "first", turns: 2, mtime: t })
      const before = yield* index.list({ cwd })
      expect(before[0]?.messageCount).toBe(5)
      yield* Effect.scoped(Effect.gen(function*() {
        const writer = yield* store.open({ cwd, sessionId: "s1" })
        yield* writer.append(user("s1", "u9", "a1", "later"))
        yield* writer.append(TranscriptStore.customTitle("s1", "Renamed"))
        yield* writer.append(assistant("s1", "a9", "u9", "x".repeat(100_000)))
      }))
      const after = yield* index.list({ cwd })
      expect(after[0]).toMatchObject({ messageCount: 7, title: "Renamed", firstPrompt: "first" })
      // A session that only initialized has no file, and is not listed.
      yield* Effect.scoped(Effect.flatMap(store.open({ cwd, sessionId: "empty" }), (writer) =>
        writer.append({ type: "queue-operation", operation: "enqueue", timestamp: "t", sessionId: "empty" })))
      expect((yield* index.list({ cwd })).map((info) => info.sessionId)).toEqual(["s1"])

      // `/home/dev-project` shares the folder of `/home/dev/project`: its entries tell them apart.
      const twin = "/home/dev-project"
      expect(store.layout.projectDir(twin)).toBe(store.layout.projectDir(cwd))
      yield* Effect.scoped(Effect.flatMap(store.open({ cwd: twin, sessionId: "twin" }), (writer) =>
        writer.append({ ...user("twin", "t0", null, "twin prompt"), cwd: twin })))
      expect((yield* index.list({ cwd })).map((info) => info.sessionId)).toEqual(["s1"])
      expect((yield* index.list({ cwd: twin })).map((info) => info.sessionId)).toEqual(["twin"])
      const both = yield* index.list({ projectDir: store.layout.projectDir(cwd) })
      expect(both.map((info) => info.sessionId).sort()).toEqual(["s1", "twin"])
    }).pipe(Effect.provide(NodeContext.layer)))
})
