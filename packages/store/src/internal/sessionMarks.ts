/**
 * skein's records beside the CLI's files: `skein/sessions/<id>.json`, what
 * skein knows of a session (a worker fork is hidden from listings), and
 * `skein/live/<id>.json`, a session held open by a live process. Both are
 * written atomically: a marker is whole or absent, also after a power loss.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { AtomicFile } from "@skein/kernel"
import type { Scope } from "effect"
import { Effect, Schema } from "effect"
import * as Path from "node:path"
import * as LiveRegistry from "./liveRegistry.js"
import { SessionIndexError } from "./sessionIndexError.js"

export const SessionMark = Schema.Struct({
  sessionId: Schema.String,
  kind: Schema.Literal("worker", "session"),
  parentSessionId: Schema.optional(Schema.String),
  label: Schema.optional(Schema.String),
  createdAt: Schema.Number
})

export type SessionMark = typeof SessionMark.Type

const isSessionMark = Schema.is(SessionMark)

export const marksDir = (root: string): string => Path.join(root, "skein", "sessions")

/** Temp file, fsync, rename, fsync of the folder. */
const writeAtomic = (fs: FileSystem.FileSystem, path: string, value: unknown) =>
  AtomicFile.makeDirectory(Path.dirname(path)).pipe(
    Effect.zipRight(AtomicFile.write(path, `${JSON.stringify(value)}\n`)),
    Effect.provideService(FileSystem.FileSystem, fs),
    Effect.mapError((error) => new SessionIndexError({ path, message: error.message }))
  )

/** The marks of a root, by session id; unreadable or foreign files are skipped. */
export const readMarks = (fs: FileSystem.FileSystem, root: string): Effect.Effect<Map<string, SessionMark>, SessionIndexError> =>
  Effect.gen(function*() {
    const dir = marksDir(root)
    const values = yield* LiveRegistry.readJsonObjects(fs, dir).pipe(
      Effect.mapError((error) => new SessionIndexError({ path: dir, message: error.message }))
    )
    const result = new Map<string, SessionMark>()
    for (const value of values) {
      if (isSessionMark(value)) result.set(value.sessionId, value)
    }
    return result
  })

export const writeMark = (
  fs: FileSystem.FileSystem,
  root: string,
  record: Omit<SessionMark, "createdAt"> & { readonly createdAt?: number | undefined }
): Effect.Effect<void, SessionIndexError> =>
  writeAtomic(fs, Path.join(marksDir(root), `${record.sessionId}.json`), {
    ...record,
    createdAt: record.createdAt ?? Date.now()
  })

/** Writes a live marker held by `pid` (default this process) and removes it when the scope closes. */
export const markLive = (
  fs: FileSystem.FileSystem,
  root: string,
  options: { readonly sessionId: string; readonly cwd?: string | undefined; readonly pid?: number | undefined }
): Effect.Effect<void, SessionIndexError, Scope.Scope> => {
  const path = Path.join(LiveRegistry.liveDir(root), `${options.sessionId}.json`)
  const pid = options.pid ?? process.pid
  const marker: typeof LiveRegistry.LiveMarker.Type = {
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
}
