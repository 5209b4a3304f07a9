/**
 * The active segment of an event log: the one file appends go to. Its file
 * lives in a scope of its own, forked from the log's, so that rotation
 * closes it while the log stays open.
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import { Effect, ExecutionStrategy, Exit, Scope } from "effect"
import * as Path from "node:path"
import { EventLogError, failAt } from "./eventLogError.js"
import { type Segment, segmentName } from "./eventSegments.js"

export interface SegmentWriter {
  /** The active segment's path and size, when there is one. */
  readonly active: () => { readonly path: string; readonly size: number } | undefined
  /**
   * Writes `bytes`, whose first record has `firstSeq`, rotating first to a
   * new segment named after it when the active one is full (a segment holds
   * at least one write). Returns whether it rotated.
   */
  readonly write: (firstSeq: number, bytes: Uint8Array) => Effect.Effect<boolean, EventLogError>
  /** fsyncs the active segment, ignoring failures: for the log's finalizer. */
  readonly syncActive: Effect.Effect<void>
}

export const make = (
  fs: FileSystem.FileSystem,
  options: {
    readonly dir: string
    /** The log's scope: each segment's scope is forked from it. */
    readonly scope: Scope.Scope
    readonly segmentBytes: number
    readonly fsync: boolean
    /** The newest segment on disk, which keeps taking appends. */
    readonly last: Segment | undefined
  }
): Effect.Effect<SegmentWriter, EventLogError> =>
  Effect.gen(function*() {
    const { dir, scope, segmentBytes } = options
    let active: { segment: Segment; file: FileSystem.File; scope: Scope.CloseableScope; size: number } | undefined

    const openSegment = (segment: Segment) =>
      Effect.gen(function*() {
        const segmentScope = yield* Scope.fork(scope, ExecutionStrategy.sequential)
        const file = yield* Scope.extend(fs.open(segment.path, { flag: "a", mode: 0o600 }), segmentScope)
        const size = Number((yield* file.stat).size)
        active = { segment, file, scope: segmentScope, size }
        return active
      }).pipe(Effect.mapError(failAt(segment.path)))

    if (options.last !== undefined) yield* openSegment(options.last)

    const write = (firstSeq: number, bytes: Uint8Array) =>
      Effect.gen(function*() {
        let rotated = false
        if (active === undefined || (active.size > 0 && active.size + bytes.length > segmentBytes)) {
          if (active !== undefined) yield* Scope.close(active.scope, Exit.void)
          yield* openSegment({ firstSeq, path: Path.join(dir, segmentName(firstSeq)) })
          rotated = true
        }
        const target = active
        if (target === undefined) return yield* new EventLogError({ path: dir, message: "no active segment" })
        yield* target.file.writeAll(bytes).pipe(Effect.mapError(failAt(target.segment.path)))
        if (options.fsync) yield* target.file.sync.pipe(Effect.mapError(failAt(target.segment.path)))
        target.size += bytes.length
        return rotated
      })

    return {
      active: () => active === undefined ? undefined : { path: active.segment.path, size: active.size },
      write,
      syncActive: Effect.suspend(() => active === undefined ? Effect.void : Effect.ignore(active.file.sync))
    }
  })
