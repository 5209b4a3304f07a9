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
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Ndjson from "@skein/protocol/Ndjson"
import type { Scope } from "effect"
import {
  Clock,
  Duration,
  Effect,
  ExecutionStrategy,
  Exit,
  Option,
  PubSub,
  Schema,
  Scope as ScopeModule,
  Stream
} from "effect"
import * as Path from "node:path"
import * as Jsonl from "./internal/jsonlFile.js"

// ---------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------

/**
 * The log's folder or a segment could not be read or written.
 *
 * @since 0.0.0
 */
export class EventLogError extends Schema.TaggedError<EventLogError>()("EventLogError", {
  path: Schema.String,
  message: Schema.String
}) {}

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
}

/**
 * @since 0.0.0
 */
export interface EventLog<A> {
  readonly dir: string
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
// Segments
// ---------------------------------------------------------------------------

const segmentName = (firstSeq: number) => `${String(firstSeq).padStart(16, "0")}.jsonl`

const segmentSeq = (name: string): number | undefined => {
  const match = /^(\d{16})\.jsonl$/.exec(name)
  return match === null ? undefined : Number(match[1])
}

interface Segment {
  readonly firstSeq: number
  readonly path: string
}

const isNotFound = (error: PlatformError) => error._tag === "SystemError" && error.reason === "NotFound"

const listSegments = (fs: FileSystem.FileSystem, dir: string) =>
  fs.readDirectory(dir).pipe(
    Effect.catchIf(isNotFound, () => Effect.succeed<ReadonlyArray<string>>([])),
    Effect.map((names) =>
      names
        .flatMap((name): ReadonlyArray<Segment> => {
          const firstSeq = segmentSeq(name)
          return firstSeq === undefined ? [] : [{ firstSeq, path: Path.join(dir, name) }]
        })
        .sort((a, b) => a.firstSeq - b.firstSeq)
    )
  )

const RawRecord = Schema.Struct({ seq: Schema.Number, at: Schema.Number, message: Schema.Unknown })
const decodeRawRecord = Schema.decodeUnknownOption(Schema.parseJson(RawRecord))

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
  const segmentBytes = options.segmentBytes ?? 8 * 1024 * 1024
  const fail = (path: string) => (error: PlatformError) => new EventLogError({ path, message: error.message })
  const encode = Schema.encode(options.schema)
  const decode = Schema.decodeUnknownOption(options.schema)

  yield* Effect.mapError(fs.makeDirectory(dir, { recursive: true, mode: 0o700 }), fail(dir))

  // The active segment: its file lives in its own scope, closed at rotation.
  let active: { segment: Segment; file: FileSystem.File; scope: ScopeModule.CloseableScope; size: number } | undefined
  let nextSeq = 1

  const segments = yield* Effect.mapError(listSegments(fs, dir), fail(dir))
  const last = segments.at(-1)
  if (last !== undefined) {
    const repairs = yield* Effect.mapError(Jsonl.repairTail(fs, last.path), fail(last.path))
    for (const repair of repairs) {
      yield* Effect.logWarning("EventLog: cut a torn tail").pipe(
        Effect.annotateLogs({ path: repair.path, offset: repair.offset, bytes: repair.bytes, reason: repair.reason })
      )
    }
    nextSeq = yield* lastSeq(fs, last.path).pipe(
      Effect.map(Option.match({ onNone: () => last.firstSeq, onSome: (seq) => seq + 1 })),
      Effect.mapError(fail(last.path))
    )
  }

  const openSegment = (segment: Segment) =>
    Effect.gen(function*() {
      const segmentScope = yield* ScopeModule.fork(scope, ExecutionStrategy.sequential)
      const file = yield* ScopeModule.extend(fs.open(segment.path, { flag: "a", mode: 0o600 }), segmentScope)
      const size = Number((yield* file.stat).size)
      active = { segment, file, scope: segmentScope, size }
      return active
    }).pipe(Effect.mapError(fail(segment.path)))

  if (last !== undefined) yield* openSegment(last)

  const pubsub = yield* Effect.acquireRelease(
    PubSub.sliding<Record<A>>(options.followBuffer ?? 1024),
    PubSub.shutdown
  )
  const lock = yield* Effect.makeSemaphore(1)

  const prune = Effect.gen(function*() {
    const retention = options.retention
    if (retention === undefined) return []
    const all = yield* Effect.mapError(listSegments(fs, dir), fail(dir))
    const closed = all.filter((segment) => segment.path !== active?.segment.path)
    const infos = yield* Effect.forEach(closed, (segment) =>
      Effect.map(Effect.option(fs.stat(segment.path)), (info) => ({ segment, info })))
    const activeSize = active?.size ?? 0
    let total = activeSize + infos.reduce((sum, { info }) => sum + Option.match(info, { onNone: () => 0, onSome: (i) => Number(i.size) }), 0)
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
      yield* fs.remove(segment.path).pipe(Effect.catchIf(isNotFound, () => Effect.void), Effect.mapError(fail(segment.path)))
      total -= size
      deleted.push(segment.path)
    }
    return deleted
  })

  yield* prune

  const appendAll = (messages: ReadonlyArray<A>) =>
    lock.withPermits(1)(Effect.gen(function*() {
      if (messages.length === 0) return []
      const at = yield* Clock.currentTimeMillis
      const records: Array<Record<A>> = []
      let text = ""
      for (const [i, message] of messages.entries()) {
        const encoded = yield* encode(message).pipe(
          Effect.mapError((error) => new EventLogError({ path: dir, message: `cannot encode a message: ${error.message}` }))
        )
        const record = { seq: nextSeq + i, at, message }
        records.push(record)
        text += `${JSON.stringify({ seq: record.seq, at, message: encoded })}\n`
      }
      const bytes = new TextEncoder().encode(text)
      let rotated = false
      if (active === undefined || (active.size > 0 && active.size + bytes.length > segmentBytes)) {
        if (active !== undefined) yield* ScopeModule.close(active.scope, Exit.void)
        yield* openSegment({ firstSeq: nextSeq, path: Path.join(dir, segmentName(nextSeq)) })
        rotated = true
      }
      const target = active
      if (target === undefined) return yield* new EventLogError({ path: dir, message: "no active segment" })
      yield* target.file.writeAll(bytes).pipe(Effect.mapError(fail(target.segment.path)))
      if (options.fsync === true) yield* target.file.sync.pipe(Effect.mapError(fail(target.segment.path)))
      target.size += bytes.length
      nextSeq += records.length
      yield* PubSub.publishAll(pubsub, records)
      if (rotated) yield* prune
      return records
    }))

  const read = (from = 1, to?: number): Stream.Stream<Record<A>, EventLogError> =>
    Stream.unwrap(Effect.gen(function*() {
      const end = to ?? nextSeq
      const all = yield* Effect.mapError(listSegments(fs, dir), fail(dir))
      // The segment holding `from`, and every later one.
      const startAt = Math.max(0, all.findLastIndex((segment) => segment.firstSeq <= from))
      const wanted = all.slice(startAt).filter((segment) => segment.firstSeq < end)
      return Stream.fromIterable(wanted).pipe(
        Stream.flatMap((segment) => readSegment(segment.path), { concurrency: 1 }),
        Stream.filter((record) => record.seq >= from),
        Stream.takeWhile((record) => record.seq < end)
      )
    }))

  const readSegment = (path: string): Stream.Stream<Record<A>, EventLogError> =>
    fs.stream(path, { chunkSize: 256 * 1024 }).pipe(
      // Retention may delete a segment while it is being read: its records are gone.
      Stream.catchAll((error) => isNotFound(error) ? Stream.empty : Stream.fail(fail(path)(error))),
      Ndjson.frames(),
      Stream.filterMap((frame) => {
        if (frame._tag !== "Line") return Option.none()
        return Option.flatMap(decodeRawRecord(frame.text), (raw) =>
          Option.map(decode(raw.message), (message): Record<A> => ({ seq: raw.seq, at: raw.at, message })))
      })
    )

  const follow = (from = 1): Stream.Stream<Record<A>, EventLogError> =>
    Stream.unwrapScoped(Effect.gen(function*() {
      // Subscribing and reading the end under the lock: every record after
      // `end` reaches the subscription, every record before it is on disk.
      const { end, subscription } = yield* lock.withPermits(1)(
        Effect.map(PubSub.subscribe(pubsub), (subscription) => ({ subscription, end: nextSeq }))
      )
      let last = from - 1
      const emit = (stream: Stream.Stream<Record<A>, EventLogError>) =>
        stream.pipe(
          Stream.filter((record) => record.seq > last),
          Stream.tap((record) =>
            Effect.sync(() => {
              last = record.seq
            })
          )
        )
      const live = Stream.fromQueue(subscription).pipe(
        Stream.flatMap((record) => {
          if (record.seq <= last) return Stream.empty
          if (record.seq === last + 1) return emit(Stream.make(record))
          // The buffer slid past records this follower had not taken: refill from disk.
          return emit(Stream.concat(read(last + 1, record.seq), Stream.make(record)))
        }, { concurrency: 1 })
      )
      return Stream.concat(emit(read(from, end)), live)
    }))

  yield* Effect.addFinalizer(() =>
    active === undefined ? Effect.void : Effect.ignore(active.file.sync)
  )

  return {
    dir,
    append: (message) => Effect.map(appendAll([message]), (records) => records[0]!),
    appendAll,
    nextSeq: Effect.sync(() => nextSeq),
    firstSeq: Effect.map(Effect.mapError(listSegments(fs, dir), fail(dir)), (all) => all[0]?.firstSeq ?? nextSeq),
    read,
    follow,
    prune: lock.withPermits(1)(prune)
  }
})

/** The seq of a segment's last record, reading backwards from its end. */
const lastSeq = (fs: FileSystem.FileSystem, path: string): Effect.Effect<Option.Option<number>, PlatformError> =>
  Effect.scoped(Effect.gen(function*() {
    const file = yield* fs.open(path, { flag: "r" })
    let end = Number((yield* file.stat).size)
    while (end > 0) {
      const start = (yield* Jsonl.lastNewlineBefore(file, end - 1)) + 1
      const line = new TextDecoder().decode(yield* Jsonl.readAt(file, start, end - start))
      const record = decodeRawRecord(line.trimEnd())
      if (Option.isSome(record)) return Option.some(record.value.seq)
      end = start
    }
    return Option.none()
  }))
