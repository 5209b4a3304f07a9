/**
 * Failure 10 of issue 9: transcript writers must be exclusive across
 * processes, must never touch a transcript whose CLI is live, and must make
 * new names durable. Cross-process cases run real child processes.
 */
import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { expect, layer } from "@effect/vitest"
import { Branch, SessionIndex, TranscriptLayout, TranscriptStore } from "@skein/store"
import * as SpyFs from "@skein/testkit/SpyFs"
import * as TsChild from "@skein/testkit/TsChild"
import { Effect, Layer, Option, Stream } from "effect"
import * as NodeFs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const sessionId = "10101010-2222-4333-8444-555555555555"
const cwd = "/work/failure ten"
const liveCli = fileURLToPath(new URL("./child/liveCli.ts", import.meta.url))
const storeWriter = fileURLToPath(new URL("./child/storeWriter.ts", import.meta.url))

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

/** A fresh config root with a store over it (and a SessionIndex, for `markLive`). */
const setup = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const root = yield* fs.makeTempDirectoryScoped({ prefix: "skein-f10-" })
  const layout = TranscriptLayout.layer(root)
  const store = yield* TranscriptStore.make.pipe(Effect.provide(layout))
  const index = yield* SessionIndex.make.pipe(Effect.provide(layout))
  return { root, store, index, path: store.layout.session(cwd, sessionId).transcript }
})

/** The error of an open that must fail; a writer that opened instead fails the test with a plain value. */
const refusal = <E, R>(open: Effect.Effect<TranscriptStore.Writer, E, R>) =>
  Effect.flip(Effect.scoped(Effect.as(open, "the writer opened")))

/** Starts a TypeScript child and waits for its first stdout line; the scope kills it. */
const startChild = (entry: string, args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const child = yield* Command.start(Command.make(process.execPath, ...TsChild.nodeArgs(entry), ...args))
    const first = yield* child.stdout.pipe(Stream.decodeText(), Stream.splitLines, Stream.runHead)
    return { child, first: Option.getOrElse(first, () => "") }
  })

// Real time: the children run on it.
layer(NodeContext.layer, { excludeTestServices: true })("TranscriptStore across processes (failure 10)", (it) => {
  it.scoped("failure 10: a writer on a transcript a live CLI appends to leaves its last line alone", () =>
    Effect.gen(function*() {
      const { root, store, path } = yield* setup
      const { child, first } = yield* startChild(liveCli, [root, path, sessionId, cwd])
      expect(first).toBe("appending")
      const before = NodeFs.readFileSync(path)
      expect(before.at(-1)).not.toBe(0x0a)

      const refused = yield* refusal(store.open({ cwd, sessionId }))
      expect(refused).toMatchObject({ _tag: "TranscriptLive", sessionId, pid: child.pid, path })
      // The standalone writer, given the root, refuses the same way.
      const standalone = yield* refusal(TranscriptStore.makeWriter({ path, sessionId, liveRoot: root }))
      expect(standalone).toMatchObject({ _tag: "TranscriptLive", pid: child.pid })
      expect(NodeFs.readFileSync(path).equals(before)).toBe(true)

      // Once the CLI is gone, the torn line is a crash's leftover and is cut.
      yield* child.kill("SIGKILL")
      const repairs = yield* Effect.scoped(
        Effect.map(store.open({ cwd, sessionId, reAppendOnClose: false }), (writer) => writer.repairs)
      )
      expect(repairs.map((repair) => repair.reason)).toEqual(["NoNewline"])
      expect(NodeFs.readFileSync(path, "utf8").endsWith("\n")).toBe(true)
    }), { timeout: 60_000 })

  it.scoped("failure 10: a session a host marked live for its CLI child is refused too, and its file left as it is", () =>
    Effect.gen(function*() {
      const { root, store, index, path } = yield* setup
      // A child that is not registered with the CLI's registry: here the host marks it.
      const other = `${sessionId}-x`
      const { child } = yield* startChild(liveCli, [root, `${path}.other`, other, cwd])
      NodeFs.mkdirSync(Path.dirname(path), { recursive: true })
      const torn = `${JSON.stringify(user("u1", null, "hi"))}\n{"type":"user","uuid":"u2"`
      NodeFs.writeFileSync(path, torn)
      yield* index.markLive({ sessionId, cwd, pid: child.pid })
      const refused = yield* refusal(store.open({ cwd, sessionId }))
      expect(refused).toMatchObject({ _tag: "TranscriptLive", pid: child.pid })
      expect(NodeFs.readFileSync(path, "utf8")).toBe(torn)
      // A marker naming this very process is its own session: it opens.
      yield* Effect.scoped(index.markLive({ sessionId, cwd }).pipe(
        Effect.zipRight(store.open({ cwd, sessionId, reAppendOnClose: false }))
      ))
    }), { timeout: 60_000 })

  it.scoped("failure 10: a second writer in another process gets TranscriptWriterBusy, until that process dies", () =>
    Effect.gen(function*() {
      const { root, store, path } = yield* setup
      const { child, first } = yield* startChild(storeWriter, [root, cwd, sessionId])
      expect(first).toBe("open")
      const before = NodeFs.readFileSync(path)

      const busy = yield* refusal(store.open({ cwd, sessionId }))
      expect(busy).toMatchObject({ _tag: "TranscriptWriterBusy", path, pid: child.pid })
      expect(NodeFs.readFileSync(path).equals(before)).toBe(true)

      // A dead holder's lock is taken over.
      yield* child.kill("SIGKILL")
      yield* Effect.scoped(Effect.gen(function*() {
        const writer = yield* store.open({ cwd, sessionId, reAppendOnClose: false })
        yield* writer.append(user("u2", "held-1", "after the holder died"))
      }))
      const read = yield* TranscriptStore.read(path)
      expect(read.entries.map((entry) => "uuid" in entry ? entry.uuid : "")).toEqual(["held-1", "u2"])
      // The lock lives outside the CLI's folders and is gone once given back.
      expect(NodeFs.readdirSync(Path.dirname(path))).toEqual([Path.basename(path)])
      const locks = Path.dirname(TranscriptStore.lockPathOf(path, root))
      expect(NodeFs.readdirSync(locks)).toEqual([])
    }), { timeout: 60_000 })
})

/** A store whose FileSystem records fsyncs, renames and links. */
const spied = Effect.gen(function*() {
  const events: Array<string> = []
  const fs = yield* SpyFs.make(events)
  const { root, path } = yield* setup
  const store = yield* TranscriptStore.make.pipe(
    Effect.provide(Layer.merge(TranscriptLayout.layer(root), Layer.succeed(FileSystem.FileSystem, fs)))
  )
  return { events, fs, root, path, store }
})

/** The temp file that was renamed (or linked) onto `target`, and where that happened. */
const placed = (events: ReadonlyArray<string>, target: string) => {
  const at = events.findIndex((e) => /^(rename|link) /.test(e) && e.endsWith(` -> ${target}`))
  const temp = at === -1 ? "" : events[at]!.replace(/^(rename|link) /, "").split(" -> ")[0]!
  return { at, temp }
}

layer(NodeContext.layer)("TranscriptStore durable names (failure 10)", (it) => {
  it.scoped("failure 10: creating a transcript fsyncs its folder and the parents of new folders", () =>
    Effect.gen(function*() {
      const { events, path, store } = yield* spied
      const projectDir = Path.dirname(path)
      yield* Effect.scoped(Effect.gen(function*() {
        const writer = yield* store.open({ cwd, sessionId, reAppendOnClose: false })
        yield* writer.append(user("u1", null, "hello"))
      }))
      expect(events).toContain(`sync ${path}`)
      expect(events).toContain(`sync ${projectDir}`)
      // The project folder was new: its parent records it.
      expect(events).toContain(`sync ${Path.dirname(projectDir)}`)
    }))

  it.scoped("failure 10: a subagent's .meta.json is fsynced before its rename, and its folder after", () =>
    Effect.gen(function*() {
      const { events, store } = yield* spied
      const paths = store.layout.session(cwd, sessionId).subagent("worker-1")
      yield* Effect.scoped(store.openSidechain({ cwd, sessionId, agentId: "worker-1", meta: { agentType: "fork" } }))
      const { at, temp } = placed(events, paths.meta)
      expect(at).toBeGreaterThan(-1)
      expect(events.slice(0, at)).toContain(`sync ${temp}`)
      expect(events.slice(at)).toContain(`sync ${Path.dirname(paths.meta)}`)
      expect(JSON.parse(NodeFs.readFileSync(paths.meta, "utf8"))).toEqual({ agentType: "fork" })
      expect(NodeFs.statSync(paths.meta).mode & 0o777).toBe(0o600)
    }))

  it.scoped("failure 10: a branch is fsynced before it is linked into place, and its folder after", () =>
    Effect.gen(function*() {
      const { events, fs, path } = yield* spied
      NodeFs.mkdirSync(Path.dirname(path), { recursive: true })
      NodeFs.writeFileSync(path, [user("u1", null, "one"), user("u2", "u1", "two")].map((e) => JSON.stringify(e)).join("\n") + "\n")
      const branched = yield* Branch.branch(path, { at: "u2" }).pipe(Effect.provideService(FileSystem.FileSystem, fs))
      const { at, temp } = placed(events, branched.path)
      expect(events[at]).toMatch(/^link /)
      expect(events.slice(0, at)).toContain(`sync ${temp}`)
      expect(events.slice(at)).toContain(`sync ${Path.dirname(branched.path)}`)
      expect(NodeFs.existsSync(temp)).toBe(false)
    }))
})
