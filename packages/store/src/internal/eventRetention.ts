/**
 * Retention of an event log: deletes the oldest closed segments while the
 * log is over `maxBytes`, and any closed segment last written longer ago
 * than `maxAge`. The active segment is never deleted, but its size counts.
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import { Clock, Duration, Effect, Option } from "effect"
import type { Retention } from "../EventLog.js"
import { type EventLogError, failAt } from "./eventLogError.js"
import { isNotFound, listSegments } from "./eventSegments.js"

/** Applies `retention` to `dir`; returns the deleted segment files. */
export const prune = (
  fs: FileSystem.FileSystem,
  dir: string,
  retention: Retention | undefined,
  active: { readonly path: string; readonly size: number } | undefined
): Effect.Effect<ReadonlyArray<string>, EventLogError> =>
  Effect.gen(function*() {
    if (retention === undefined) return []
    const all = yield* listSegments(fs, dir)
    const closed = all.filter((segment) => segment.path !== active?.path)
    const infos = yield* Effect.forEach(closed, (segment) =>
      Effect.map(Effect.option(fs.stat(segment.path)), (info) => ({ segment, info })))
    let total = (active?.size ?? 0) +
      infos.reduce((sum, { info }) => sum + Option.match(info, { onNone: () => 0, onSome: (i) => Number(i.size) }), 0)
    const now = yield* Clock.currentTimeMillis
    const maxAge = retention.maxAge === undefined ? undefined : Duration.toMillis(retention.maxAge)
    const deleted: Array<string> = []
    for (const { info, segment } of infos) {
      if (Option.isNone(info)) continue
      const size = Number(info.value.size)
      const mtime = Option.getOrElse(info.value.mtime, () => new Date(now)).getTime()
      const tooBig = retention.maxBytes !== undefined && total > retention.maxBytes
      const tooOld = maxAge !== undefined && now - mtime > maxAge
      if (!tooBig && !tooOld) continue
      yield* fs.remove(segment.path).pipe(Effect.catchIf(isNotFound, () => Effect.void), Effect.mapError(failAt(segment.path)))
      total -= size
      deleted.push(segment.path)
    }
    return deleted
  })
