/**
 * The sessions of a config root: listing, lookup, and `continue`.
 *
 * Listing stays cheap on long transcripts: one `stat`, a head scan (first
 * prompt, cwd), a tail scan (titles, last prompt), and a message count that
 * only reads what a file grew by since the last listing.
 *
 * Two kinds of skein records sit beside the CLI's files, under `<root>/skein/`:
 * - `live/<sessionId>.json`: a session is open, held by the process `pid`
 *   (`markLive`). The CLI's own registry, `<root>/sessions/<pid>.json`, counts
 *   too. A marker whose process is gone is ignored.
 * - `sessions/<sessionId>.json`: what skein knows of a session. A `worker`
 *   (a fork) is hidden from `list` and `continue` unless asked for (`markWorker`).
 *
 * Subagent transcripts live in `<sessionId>/subagents/` and never appear here.
 *
 * @since 0.0.0
 */
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import { AtomicFile } from "@skein/kernel"
import { Context, Effect, Layer, Option, Ref, Schema } from "effect"
import type { Scope } from "effect"
import * as Path from "node:path"
import * as LiveRegistry from "./internal/liveRegistry.js"
import { countMessages } from "./internal/messageCount.js"
import * as TranscriptLayout from "./TranscriptLayout.js"
import * as TranscriptStore from "./TranscriptStore.js"

// ---------------------------------------------------------------------------
// Errors and records
// ---------------------------------------------------------------------------

/**
 * A folder or marker could not be read or written.
 *
 * @since 0.0.0
 */
export class SessionIndexError extends Schema.TaggedError<SessionIndexError>()("SessionIndexError", {
  path: Schema.String,
  message: Schema.String
}) {}

/**
 * The live marker of a session.
 *
 * @since 0.0.0
 */
export const LiveMarker = LiveRegistry.LiveMarker

/**
 * @since 0.0.0
 */
export interface LiveMarker extends Schema.Schema.Type<typeof LiveMarker> {}

/**
 * skein's record of a session. `kind: "worker"` hides it from listings.
 *
 * @since 0.0.0
 */
export const SessionMark = Schema.Struct({
  sessionId: Schema.String,
  kind: Schema.Literal("worker", "session"),
  parentSessionId: Schema.optional(Schema.String),
  label: Schema.optional(Schema.String),
  createdAt: Schema.Number
})

/**
 * @since 0.0.0
 */
export interface SessionMark extends Schema.Schema.Type<typeof SessionMark> {}

/**
 * One listed session.
 *
 * @since 0.0.0
 */
export interface SessionInfo {
  readonly sessionId: string
  readonly path: string
  readonly projectDir: string
  /** The custom title, else the AI title, else the first prompt. */
  readonly title: string | undefined
  readonly titleSource: "custom-title" | "ai-title" | "first-prompt" | undefined
  readonly customTitle: string | undefined
  readonly aiTitle: string | undefined
  readonly firstPrompt: string | undefined
  readonly lastPrompt: string | undefined
  readonly tag: string | undefined
  /** The `cwd` the first entries record (the folder name alone is ambiguous). */
  readonly cwd: string | undefined
  readonly gitBranch: string | undefined
  readonly mtime: Date
  readonly size: number
  /** User and assistant lines. */
  readonly messageCount: number
  readonly live: boolean
  /** The pid holding the session open, when live. */
  readonly ownerPid: number | undefined
  readonly mark: SessionMark | undefined
  readonly isWorker: boolean
}

/**
 * @since 0.0.0
 */
export interface ListOptions {
  /**
   * One project: the folder of this cwd (pass the physical path). Sessions
   * whose entries record another cwd that sanitizes to the same folder are
   * left out.
   */
  readonly cwd?: string | undefined
  /** One project folder, given directly. Without `cwd` or `projectDir`, every project. */
  readonly projectDir?: string | undefined
  /** Include worker sessions (forks). Default false. */
  readonly workers?: boolean | undefined
}

/**
 * @since 0.0.0
 */
export type Query =
  | { readonly _tag: "Id"; readonly sessionId: string }
  | { readonly _tag: "Title"; readonly title: string }
  | { readonly _tag: "Path"; readonly path: string }

// ---------------------------------------------------------------------------
// Liveness
// ---------------------------------------------------------------------------

/** @since 0.0.0 */
export const liveDir: (root: string) => string = LiveRegistry.liveDir

/** @since 0.0.0 */
export const marksDir = (root: string): string => Path.join(root, "skein", "sessions")

const isNotFound = LiveRegistry.isNotFound

const readJsonObjects = (fs: FileSystem.FileSystem, dir: string) =>
  LiveRegistry.readJsonObjects(fs, dir).pipe(
    Effect.mapError((error) => new SessionIndexError({ path: dir, message: error.message }))
  )

/** Temp file, fsync, rename, fsync of the folder: a marker is whole or absent, also after a power loss. */
const writeAtomic = (fs: FileSystem.FileSystem, path: string, value: unknown) =>
  AtomicFile.makeDirectory(Path.dirname(path)).pipe(
    Effect.zipRight(AtomicFile.write(path, `${JSON.stringify(value)}\n`)),
    Effect.provideService(FileSystem.FileSystem, fs),
    Effect.mapError((error) => new SessionIndexError({ path, message: error.message }))
  )

const isSessionMark = Schema.is(SessionMark)

/**
 * The sessions held open by a live process right now: skein's markers and
 * the CLI's registry, by session id, with the owner's pid.
 *
 * @since 0.0.0
 */
export const liveSessions = (root: string): Effect.Effect<ReadonlyMap<string, number>, SessionIndexError, FileSystem.FileSystem> =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => LiveRegistry.liveSessions(fs, root)).pipe(
    Effect.mapError((error) => new SessionIndexError({ path: root, message: error.message }))
  )

// ---------------------------------------------------------------------------
// Head scan
// ---------------------------------------------------------------------------

interface Head {
  readonly firstPrompt: string | undefined
  readonly cwd: string | undefined
  readonly gitBranch: string | undefined
}

const promptText = (content: unknown): string | undefined => {
  if (typeof content === "string") return content
  if (Array.isArray(content)) {
    for (const block of content) {
      if (typeof block === "object" && block !== null && "type" in block && block.type === "text" && "text" in block) {
        if (typeof block.text === "string") return block.text
      }
    }
  }
  return undefined
}

/** A prompt a person typed, as opposed to command echoes and injected context. */
const isTypedPrompt = (text: string) => text.trim().length > 0 && !text.startsWith("<")

const headScanBytes = 64 * 1024
const headScanLimit = 4 * 1024 * 1024

/**
 * The first prompt, cwd and git branch from a transcript's first lines,
 * reading 64 KiB at a time and never more than 4 MiB.
 */
const headScan = (fs: FileSystem.FileSystem, path: string): Effect.Effect<Head, PlatformError> =>
  Effect.scoped(Effect.gen(function*() {
    const file = yield* fs.open(path, { flag: "r" })
    let cwd: string | undefined
    let gitBranch: string | undefined
    let pending = Buffer.alloc(0)
    let read = 0
    while (read < headScanLimit) {
      const chunk = Option.getOrUndefined(yield* file.readAlloc(headScanBytes))
      if (chunk === undefined || chunk.length === 0) break
      read += chunk.length
      const buf = Buffer.concat([pending, chunk])
      let start = 0
      let end = buf.indexOf(0x0a, start)
      while (end !== -1) {
        const text = buf.subarray(start, end).toString("utf8")
        start = end + 1
        end = buf.indexOf(0x0a, start)
        let json: unknown
        try {
          json = JSON.parse(text)
        } catch {
          continue
        }
        if (typeof json !== "object" || json === null) continue
        if (cwd === undefined && "cwd" in json && typeof json.cwd === "string") cwd = json.cwd
        if (gitBranch === undefined && "gitBranch" in json && typeof json.gitBranch === "string") {
          gitBranch = json.gitBranch
        }
        if (
          "type" in json && json.type === "user" && !("isMeta" in json && json.isMeta === true) &&
          !("isCompactSummary" in json && json.isCompactSummary === true) && "message" in json &&
          typeof json.message === "object" && json.message !== null && "content" in json.message
        ) {
          const text = promptText(json.message.content)
          if (text !== undefined && isTypedPrompt(text)) return { firstPrompt: text, cwd, gitBranch }
        }
      }
      pending = buf.subarray(start)
    }
    return { firstPrompt: undefined, cwd, gitBranch }
  }))

// ---------------------------------------------------------------------------
// Service
// ---------------------------------------------------------------------------

/**
 * @since 0.0.0
 */
export class SessionIndex extends Context.Tag("@skein/store/SessionIndex")<SessionIndex, {
  /** Sessions, most recently modified first. Workers only with `workers: true`. */
  readonly list: (options?: ListOptions) => Effect.Effect<ReadonlyArray<SessionInfo>, SessionIndexError>
  /** One session by id, exact title (the most recent with it) or transcript path; workers included. */
  readonly find: (query: Query, options?: { readonly cwd?: string | undefined }) => Effect.Effect<Option.Option<SessionInfo>, SessionIndexError>
  /** `find` for text typed by a person: a path, else an id, else a title. */
  readonly resolve: (text: string, options?: { readonly cwd?: string | undefined }) => Effect.Effect<Option.Option<SessionInfo>, SessionIndexError>
  /** The most recent resumable session of a cwd: has messages, not live, not a worker. */
  readonly continueSession: (cwd: string) => Effect.Effect<Option.Option<SessionInfo>, SessionIndexError>
  /** Marks a session live, held by this process (or `pid`), until the scope closes. */
  readonly markLive: (options: {
    readonly sessionId: string
    readonly cwd?: string | undefined
    readonly pid?: number | undefined
  }) => Effect.Effect<void, SessionIndexError, Scope.Scope>
  /** Records what skein knows of a session, e.g. that it is a worker forked from another. */
  readonly mark: (mark: Omit<SessionMark, "createdAt"> & { readonly createdAt?: number | undefined }) => Effect.Effect<void, SessionIndexError>
  /** Shorthand for `mark` with `kind: "worker"`. */
  readonly markWorker: (
    sessionId: string,
    options?: { readonly parentSessionId?: string | undefined; readonly label?: string | undefined }
  ) => Effect.Effect<void, SessionIndexError>
}>() {}

interface Cached {
  readonly size: number
  readonly mtimeMs: number
  readonly counted: { readonly count: number; readonly offset: number }
  readonly head: Head
  readonly info: Omit<SessionInfo, "live" | "ownerPid" | "mark" | "isWorker">
}

/**
 * @since 0.0.0
 */
export const make = Effect.gen(function*() {
  const layout = yield* TranscriptLayout.TranscriptLayout
  const fs = yield* FileSystem.FileSystem
  const cache = yield* Ref.make(new Map<string, Cached>())
  const root = layout.root
  const provideFs = Effect.provideService(FileSystem.FileSystem, fs)
  const indexError = (path: string) => (error: PlatformError) => new SessionIndexError({ path, message: error.message })

  /** What a transcript holds, scanning only what changed since the last look. */
  const describe = (projectDir: string, sessionId: string, path: string) =>
    Effect.gen(function*() {
      const stat = yield* fs.stat(path)
      const size = Number(stat.size)
      const mtime = Option.getOrElse(stat.mtime, () => new Date(0))
      const known = (yield* Ref.get(cache)).get(path)
      if (known !== undefined && known.size === size && known.mtimeMs === mtime.getTime()) return known.info
      const grew = known !== undefined && size >= known.counted.offset && known.head.firstPrompt !== undefined
      const more = yield* countMessages(fs, path, grew ? known.counted.offset : 0)
      const counted = grew ? { count: known.counted.count + more.count, offset: more.offset } : more
      const head = grew ? known.head : yield* headScan(fs, path)
      const tail = yield* TranscriptStore.tailScan(path).pipe(
        provideFs,
        Effect.catchAll((error) => Effect.fail(new SessionIndexError({ path, message: error._tag })))
      )
      const titleSource = tail.customTitle !== undefined
        ? "custom-title" as const
        : tail.aiTitle !== undefined
        ? "ai-title" as const
        : head.firstPrompt !== undefined
        ? "first-prompt" as const
        : undefined
      const info = {
        sessionId,
        path,
        projectDir,
        title: tail.customTitle ?? tail.aiTitle ?? head.firstPrompt,
        titleSource,
        customTitle: tail.customTitle,
        aiTitle: tail.aiTitle,
        firstPrompt: head.firstPrompt,
        lastPrompt: tail.lastPrompt,
        tag: tail.tag,
        cwd: head.cwd,
        gitBranch: head.gitBranch,
        mtime,
        size,
        messageCount: counted.count
      }
      yield* Ref.update(cache, (map) => new Map(map).set(path, { size, mtimeMs: mtime.getTime(), counted, head, info }))
      return info
    })

  const marks = Effect.gen(function*() {
    const result = new Map<string, SessionMark>()
    for (const value of yield* readJsonObjects(fs, marksDir(root))) {
      if (isSessionMark(value)) result.set(value.sessionId, value)
    }
    return result
  })

  const projectDirs = (options: ListOptions) =>
    Effect.gen(function*() {
      if (options.projectDir !== undefined) return [options.projectDir]
      if (options.cwd !== undefined) return [layout.projectDir(options.cwd)]
      const names = yield* fs.readDirectory(layout.projectsDir).pipe(
        Effect.catchIf(isNotFound, () => Effect.succeed<ReadonlyArray<string>>([])),
        Effect.mapError(indexError(layout.projectsDir))
      )
      return names.map((name) => Path.join(layout.projectsDir, name))
    })

  const listAll = (options: ListOptions = {}) =>
    Effect.gen(function*() {
      const live = yield* provideFs(liveSessions(root))
      const known = yield* marks
      const sessions: Array<SessionInfo> = []
      for (const projectDir of yield* projectDirs(options)) {
        const names = yield* fs.readDirectory(projectDir).pipe(
          Effect.catchIf(isNotFound, () => Effect.succeed<ReadonlyArray<string>>([])),
          Effect.mapError(indexError(projectDir))
        )
        for (const name of names) {
          const sessionId = Option.getOrUndefined(TranscriptLayout.sessionIdOfFile(name))
          if (sessionId === undefined) continue
          const mark = known.get(sessionId)
          const isWorker = mark?.kind === "worker"
          if (isWorker && options.workers !== true) continue
          // A file that vanished or cannot be read is left out, not an error.
          const info = yield* Effect.option(describe(projectDir, sessionId, Path.join(projectDir, name)))
          if (Option.isNone(info)) continue
          const recorded = info.value.cwd
          if (options.cwd !== undefined && recorded !== undefined && Path.resolve(recorded) !== Path.resolve(options.cwd)) {
            continue
          }
          const ownerPid = live.get(sessionId)
          sessions.push({ ...info.value, live: ownerPid !== undefined, ownerPid, mark, isWorker })
        }
      }
      return sessions.sort((a, b) => b.mtime.getTime() - a.mtime.getTime())
    })

  const find = (query: Query, options: { readonly cwd?: string | undefined } = {}) =>
    Effect.gen(function*() {
      if (query._tag === "Path") {
        const path = Path.resolve(query.path)
        const sessionId = Option.getOrUndefined(TranscriptLayout.sessionIdOfFile(path))
        if (sessionId === undefined) return Option.none()
        const all = yield* listAll({ projectDir: Path.dirname(path), workers: true })
        return Option.fromNullable(all.find((info) => info.path === path))
      }
      const all = yield* listAll({ cwd: options.cwd, workers: true })
      return Option.fromNullable(
        query._tag === "Id"
          ? all.find((info) => info.sessionId === query.sessionId)
          : all.find((info) => info.customTitle === query.title || info.aiTitle === query.title) ??
            all.find((info) => info.title?.toLowerCase() === query.title.toLowerCase())
      )
    })

  const resolve = (text: string, options: { readonly cwd?: string | undefined } = {}) =>
    Effect.gen(function*() {
      if (text.endsWith(TranscriptLayout.transcriptExtension) || text.includes(Path.sep)) {
        const byPath = yield* find({ _tag: "Path", path: text }, options)
        if (Option.isSome(byPath)) return byPath
      }
      const byId = yield* find({ _tag: "Id", sessionId: text }, options)
      if (Option.isSome(byId)) return byId
      return yield* find({ _tag: "Title", title: text }, options)
    })

  const mark = (record: Omit<SessionMark, "createdAt"> & { readonly createdAt?: number | undefined }) =>
    writeAtomic(fs, Path.join(marksDir(root), `${record.sessionId}.json`), {
      ...record,
      createdAt: record.createdAt ?? Date.now()
    })

  return SessionIndex.of({
    list: listAll,
    find,
    resolve,
    continueSession: (cwd) =>
      Effect.map(
        listAll({ cwd }),
        (sessions) => Option.fromNullable(sessions.find((info) => !info.live && info.messageCount > 0))
      ),
    markLive: (options) => {
      const path = Path.join(liveDir(root), `${options.sessionId}.json`)
      const pid = options.pid ?? process.pid
      const marker: LiveMarker = {
        pid,
        sessionId: options.sessionId,
        startedAt: Date.now(),
        ...(options.cwd === undefined ? {} : { cwd: options.cwd })
      }
      return Effect.acquireRelease(writeAtomic(fs, path, marker), () =>
        // Remove it only if it is still ours: a later owner may have replaced it.
        fs.readFileString(path).pipe(
          Effect.flatMap((text) => text.includes(`"pid":${pid},`) ? fs.remove(path) : Effect.void),
          Effect.ignore
        ))
    },
    mark,
    markWorker: (sessionId, options = {}) =>
      mark({
        sessionId,
        kind: "worker",
        ...(options.parentSessionId === undefined ? {} : { parentSessionId: options.parentSessionId }),
        ...(options.label === undefined ? {} : { label: options.label })
      })
  })
})

/**
 * @since 0.0.0
 */
export const layer: Layer.Layer<SessionIndex, never, TranscriptLayout.TranscriptLayout | FileSystem.FileSystem> =
  Layer.effect(SessionIndex, make)
