/**
 * Which sessions of a config root are held open by a live process: skein's
 * markers (`<root>/skein/live/<sessionId>.json`) and the CLI's own registry
 * (`<root>/sessions/<pid>.json`). `SessionIndex` lists them; the transcript
 * writer refuses a session that another live process appends to.
 */
import type { PlatformError } from "@effect/platform/Error"
import type * as FileSystem from "@effect/platform/FileSystem"
import { ProcessHost } from "@skein/kernel"
import { Effect, Option, Schema } from "effect"
import * as Path from "node:path"

/** skein's marker of a session held open by `pid`. */
export const LiveMarker = Schema.Struct({
  pid: Schema.Number,
  sessionId: Schema.String,
  cwd: Schema.optional(Schema.String),
  startedAt: Schema.Number
})

export const liveDir = (root: string): string => Path.join(root, "skein", "live")

/** The CLI's own registry of running sessions. */
export const cliSessionsDir = (root: string): string => Path.join(root, "sessions")

export const isNotFound = (error: PlatformError): boolean =>
  error._tag === "SystemError" && error.reason === "NotFound"

/** The JSON values of a folder's `.json` files; unreadable or half-written files are skipped. */
export const readJsonObjects = (
  fs: FileSystem.FileSystem,
  dir: string
): Effect.Effect<ReadonlyArray<unknown>, PlatformError> =>
  Effect.gen(function*() {
    const names = yield* fs.readDirectory(dir).pipe(
      Effect.catchIf(isNotFound, () => Effect.succeed<ReadonlyArray<string>>([]))
    )
    const values: Array<unknown> = []
    for (const name of names) {
      if (!name.endsWith(".json")) continue
      const text = yield* Effect.option(fs.readFileString(Path.join(dir, name)))
      if (Option.isNone(text)) continue
      try {
        values.push(JSON.parse(text.value))
      } catch {
        // A marker being written or a stray file: not a record.
      }
    }
    return values
  })

const isLiveMarker = Schema.is(LiveMarker)
const isCliRegistryEntry = Schema.is(Schema.Struct({ pid: Schema.Number, sessionId: Schema.String }))

/** Session id to owner pid, for owners alive right now (a marker of a dead process is ignored). */
export const liveSessions = (
  fs: FileSystem.FileSystem,
  root: string
): Effect.Effect<ReadonlyMap<string, number>, PlatformError> =>
  Effect.gen(function*() {
    const live = new Map<string, number>()
    for (const value of yield* readJsonObjects(fs, cliSessionsDir(root))) {
      if (isCliRegistryEntry(value) && ProcessHost.isAlive(value.pid)) live.set(value.sessionId, value.pid)
    }
    for (const value of yield* readJsonObjects(fs, liveDir(root))) {
      if (isLiveMarker(value) && ProcessHost.isAlive(value.pid)) live.set(value.sessionId, value.pid)
    }
    return live
  })
