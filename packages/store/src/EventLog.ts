/**
 * The runtime's own record of a session: every message the session actor
 * saw, in order, each with a `seq` that only grows, even across restarts.
 * The CLI does not replay history on `--resume`, so this log is what a
 * reconnecting client (SSE `Last-Event-ID`) is replayed from.
 *
 * On disk: a folder of segment files `<first seq, 16 digits>.jsonl`, one
 * record a line, `{"seq":…,"at":…,"message":…}`. The newest segment takes the
 * appends and rotates past `segmentBytes`; retention deletes the oldest
 * closed segments by total size or by age. Reads stream from disk and never
 * hold the history in memory.
 *
 * @since 0.0.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import type { Duration, Schema, Scope } from "effect"
import { Clock, Effect, PubSub, Stream } from "effect"
import { randomBytes } from "node:crypto"
import { type EventLogError, failAt } from "./internal/eventLogError.js"
import * as EventFollow from "./internal/eventFollow.js"
import * as EventReader from "./internal/eventReader.js"
import * as EventRecord from "./internal/eventRecord.js"
import * as EventRetention from "./internal/eventRetention.js"
import { EventTail } from "./internal/eventTail.js"
import * as Segments from "./internal/eventSegments.js"
import * as SegmentWriter from "./internal/segmentWriter.js"

// ---------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------

/**
 * The log's folder or a segment could not be read or written.
 *
 * @since 0.0.0
 */
export { EventLogError } from "./internal/eventLogError.js"

/**
 * One logged message.
 *
 * @since 0.0.0
 */
export interface Record<A> {
  readonly seq: number
  /** Epoch milliseconds (from `Clock`) when it was appended. */
  readonly at: number
  readonly message: A
}

/**
 * @since 0.0.0
 */
export interface Retention {
  /**
   * Delete the oldest closed segments while the log's total size is over
   * this. Checked at open, at each rotation and by `prune`, so the log can
   * exceed it by up to one segment.
   */
  readonly maxBytes?: number | undefined
  /** Delete closed segments last written longer ago than this. */
  readonly maxAge?: Duration.DurationInput | undefined
}

/**
 * @since 0.0.0
 */
export interface Options<A, I> {
  /** The log's folder, one per session, e.g. `<root>/skein/events/<sessionId>`. */
  readonly dir: string
  /** How messages are stored; `Schema.Unknown` keeps JSON as it is. */
  readonly schema: Schema.Schema<A, I>
  /** Rotate the active segment past this size. Default 8 MiB. */
  readonly segmentBytes?: number | undefined
  readonly retention?: Retention | undefined
  /** fsync after every append. Default false: a process crash loses nothing, a machine crash may. */
  readonly fsync?: boolean | undefined
  /** Records buffered per live follower before it falls back to disk. Default 1024. */
  readonly followBuffer?: number | undefined
  /**
   * Encoded bytes of the newest records kept in memory, where a follower that
   * fell behind catches up before it reads the disk (they take about twice
   * that in heap). Default 4 MiB; 0 keeps none.
   */
  readonly tailBytes?: number | undefined
}

/**
 * @since 0.0.0
 */
export interface EventLog<A> {
  readonly dir: string
  /**
   * Names this incarnation of the log. A log wiped (or replaced) and opened
   * again gets a new epoch, so a cursor issued by the old one is known for
   * a stranger rather than clamped onto the new log's seqs.
   */
  readonly epoch: string
  /** Appends one message and returns its record. */
  readonly append: (message: A) => Effect.Effect<Record<A>, EventLogError>
  /** Appends messages in one write, with consecutive seqs. */
  readonly appendAll: (messages: ReadonlyArray<A>) => Effect.Effect<ReadonlyArray<Record<A>>, EventLogError>
  /** The seq the next append gets. */
  readonly nextSeq: Effect.Effect<number>
  /** The oldest seq still on disk (`nextSeq` when the log is empty). */
  readonly firstSeq: Effect.Effect<number, EventLogError>
  /**
   * Records with `from <= seq < to` (`to` defaults to `nextSeq` at the call),
   * streamed from disk. Records removed by retention are simply absent.
   */
  readonly read: (from?: number, to?: number) => Stream.Stream<Record<A>, EventLogError>
  /**
   * Records from `from` on, then every new append as it happens: no gap and
   * no duplicate. A follower that falls behind its buffer catches up from disk.
   */
  readonly follow: (from?: number) => Stream.Stream<Record<A>, EventLogError>
  /** Applies retention now; returns the deleted segment files. */
  readonly prune: Effect.Effect<ReadonlyArray<string>, EventLogError>
}

// ---------------------------------------------------------------------------
// Open
// ---------------------------------------------------------------------------

/**
 * Opens (or creates) a session's event log in the current scope. The next
 * seq continues from the last record on disk; a torn last line is cut first.
 *
 * @since 0.0.0
 */
export const open = Effect.fn("EventLog.open")(function*<A, I>(
  options: Options<A, I>
): Effect.fn.Return<EventLog<A>, EventLogError, Scope.Scope | FileSystem.FileSystem> {
  const fs = yield* FileSystem.FileSystem
  const scope = yield* Effect.scope
  const dir = options.dir
  const encodeBatch = EventRecord.encodeBatch(options.schema, dir)

  yield* Effect.mapError(fs.makeDirectory(dir, { recursive: true, mode: 0o700 }), failAt(dir))

  const epoch = yield* readEpoch(fs, dir)
  const last = (yield* Segments.listSegments(fs, dir)).at(-1)
  let nextSeq = last === undefined ? 1 : yield* Segments.resumeSeq(fs, last)
  const tail = new EventTail<A>(options.tailBytes ?? 4 * 1024 * 1024)
  const writer = yield* SegmentWriter.make(fs, {
    dir,
    scope,
    segmentBytes: options.segmentBytes ?? 8 * 1024 * 1024,
    fsync: options.fsync === true,
    last
  })
  const reader = EventReader.make(fs, dir, EventRecord.decodeRecord(options.schema))
  /** A follower's catch-up: from the disk up to the records the tail holds, then from the tail. */
  const catchUp = (from: number, end: number): Stream.Stream<Record<A>, EventLogError> =>
    Stream.suspend(() => {
      const first = tail.first()
      if (first === undefined || end <= first) return reader.range(from, end)
      const held = Stream.fromIterable(tail.slice(Math.max(from, first), end))
      return from >= first ? held : Stream.concat(reader.range(from, first), held)
    })

  const pubsub = yield* Effect.acquireRelease(
    PubSub.sliding<Record<A>>(options.followBuffer ?? 1024),
    PubSub.shutdown
  )
  const lock = yield* Effect.makeSemaphore(1)
  // What retention deletes is gone for followers too, not served from the tail.
  const prune = Effect.suspend(() => EventRetention.prune(fs, dir, options.retention, writer.active())).pipe(
    Effect.tap((deleted) =>
      deleted.length === 0 ? Effect.void : Effect.map(Segments.listSegments(fs, dir), (all) => tail.dropBefore(all[0]?.firstSeq ?? nextSeq))
    )
  )

  yield* prune

  const appendAll = (messages: ReadonlyArray<A>) =>
    lock.withPermits(1)(Effect.gen(function*() {
      if (messages.length === 0) return []
      const at = yield* Clock.currentTimeMillis
      const { bytes, records } = yield* encodeBatch(messages, nextSeq, at)
      const rotated = yield* writer.write(nextSeq, bytes)
      nextSeq += records.length
      tail.add(records, bytes.length)
      yield* PubSub.publishAll(pubsub, records)
      if (rotated) yield* prune
      return records
    }))

  const read = (from = 1, to?: number): Stream.Stream<Record<A>, EventLogError> =>
    Stream.suspend(() => reader.range(from, to ?? nextSeq))

  yield* Effect.addFinalizer(() => writer.syncActive)

  return {
    dir,
    epoch,
    append: (message) => Effect.map(appendAll([message]), (records) => records[0]!),
    appendAll,
    nextSeq: Effect.sync(() => nextSeq),
    firstSeq: Effect.map(Segments.listSegments(fs, dir), (all) => all[0]?.firstSeq ?? nextSeq),
    read,
    follow: (from = 1) => EventFollow.follow({ lock, pubsub, nextSeq: () => nextSeq, read: catchUp, from }),
    prune: lock.withPermits(1)(prune)
  }
})

/** The log's epoch from `<dir>/epoch`, written at the first open. */
const readEpoch = (fs: FileSystem.FileSystem, dir: string) => {
  const file = `${dir}/epoch`
  return fs.readFileString(file).pipe(
    Effect.map((text) => text.trim()),
    Effect.filterOrFail((text) => text.length > 0),
    Effect.orElse(() => {
      const epoch = newEpoch()
      return Effect.as(fs.writeFileString(file, `${epoch}\n`, { mode: 0o600 }), epoch)
    }),
    Effect.mapError(failAt(file))
  )
}

// ---------------------------------------------------------------------------
// Cursors
// ---------------------------------------------------------------------------

/**
 * A fresh epoch: 12 hex characters, random.
 *
 * @since 0.0.0
 */
export const newEpoch = (): string => randomBytes(6).toString("hex")

/**
 * A client's cursor for a record: the log's epoch and the seq, so ids stay
 * unique across log incarnations (`<epoch>-<seq>`).
 *
 * @since 0.0.0
 */
export const cursor = (epoch: string, seq: number): string => `${epoch}-${seq}`

/**
 * Where a client holding `cursor` resumes: after the record it names, or a
 * resync when the log never issued that cursor (another epoch, a seq past
 * the end, or not a cursor at all). A bare seq (an older client's id) is
 * taken as this epoch's while it lies within the log.
 *
 * @since 0.0.0
 */
export type Resume =
  | { readonly _tag: "After"; readonly seq: number }
  | { readonly _tag: "Resync"; readonly reason: "other epoch" | "beyond the end" | "malformed" }

/**
 * @since 0.0.0
 */
export const resume = <A>(log: Pick<EventLog<A>, "epoch" | "nextSeq">, cursor: string): Effect.Effect<Resume> =>
  Effect.map(log.nextSeq, (next): Resume => {
    const match = /^(?:([0-9a-z]+)-)?(\d+)$/.exec(cursor.trim())
    if (match === null) return { _tag: "Resync", reason: "malformed" }
    if (match[1] !== undefined && match[1] !== log.epoch) return { _tag: "Resync", reason: "other epoch" }
    const seq = Number(match[2])
    return seq >= next ? { _tag: "Resync", reason: "beyond the end" } : { _tag: "After", seq }
  })
