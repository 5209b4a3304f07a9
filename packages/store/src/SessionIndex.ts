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
import * as FileSystem from "@effect/platform/FileSystem"
import { Context, Effect, Layer, Option } from "effect"
import type { Schema, Scope } from "effect"
import * as Path from "node:path"
import * as LiveRegistry from "./internal/liveRegistry.js"
import * as SessionDescriber from "./internal/sessionDescriber.js"
import { indexError, type SessionIndexError } from "./internal/sessionIndexError.js"
import * as SessionMarks from "./internal/sessionMarks.js"
import * as SessionQuery from "./internal/sessionQuery.js"
import * as TranscriptLayout from "./TranscriptLayout.js"

// ---------------------------------------------------------------------------
// Errors and records
// ---------------------------------------------------------------------------

/**
 * A folder or marker could not be read or written.
 *
 * @since 0.0.0
 */
export { SessionIndexError } from "./internal/sessionIndexError.js"

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
export const SessionMark = SessionMarks.SessionMark

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
export const marksDir: (root: string) => string = SessionMarks.marksDir

/**
 * The sessions held open by a live process right now: skein's markers and
 * the CLI's registry, by session id, with the owner's pid.
 *
 * @since 0.0.0
 */
export const liveSessions = (root: string): Effect.Effect<ReadonlyMap<string, number>, SessionIndexError, FileSystem.FileSystem> =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => LiveRegistry.liveSessions(fs, root)).pipe(
    Effect.mapError(indexError(root))
  )

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

/**
 * @since 0.0.0
 */
export const make = Effect.gen(function*() {
  const layout = yield* TranscriptLayout.TranscriptLayout
  const fs = yield* FileSystem.FileSystem
  const root = layout.root
  const describe = yield* SessionDescriber.make(fs)

  const readNames = (dir: string) =>
    fs.readDirectory(dir).pipe(
      Effect.catchIf(LiveRegistry.isNotFound, () => Effect.succeed<ReadonlyArray<string>>([])),
      Effect.mapError(indexError(dir))
    )

  const projectDirs = (options: ListOptions) =>
    Effect.gen(function*() {
      if (options.projectDir !== undefined) return [options.projectDir]
      if (options.cwd !== undefined) return [layout.projectDir(options.cwd)]
      const names = yield* readNames(layout.projectsDir)
      return names.map((name) => Path.join(layout.projectsDir, name))
    })

  const listAll = (options: ListOptions = {}) =>
    Effect.gen(function*() {
      const live = yield* Effect.provideService(liveSessions(root), FileSystem.FileSystem, fs)
      const known = yield* SessionMarks.readMarks(fs, root)
      const sessions: Array<SessionInfo> = []
      for (const projectDir of yield* projectDirs(options)) {
        for (const name of yield* readNames(projectDir)) {
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
      if (query._tag !== "Path") {
        return Option.fromNullable(SessionQuery.pick(yield* listAll({ cwd: options.cwd, workers: true }), query))
      }
      const path = Path.resolve(query.path)
      if (Option.isNone(TranscriptLayout.sessionIdOfFile(path))) return Option.none()
      return Option.fromNullable(SessionQuery.pick(yield* listAll({ projectDir: Path.dirname(path), workers: true }), query))
    })

  const resolve = (text: string, options: { readonly cwd?: string | undefined } = {}) =>
    Effect.gen(function*() {
      for (const query of SessionQuery.candidates(text)) {
        const found = yield* find(query, options)
        if (Option.isSome(found)) return found
      }
      return Option.none<SessionInfo>()
    })

  const mark = (record: Omit<SessionMark, "createdAt"> & { readonly createdAt?: number | undefined }) =>
    SessionMarks.writeMark(fs, root, record)

  return SessionIndex.of({
    list: listAll,
    find,
    resolve,
    continueSession: (cwd) =>
      Effect.map(
        listAll({ cwd }),
        (sessions) => Option.fromNullable(sessions.find((info) => !info.live && info.messageCount > 0))
      ),
    markLive: (options) => SessionMarks.markLive(fs, root, options),
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
