/**
 * Every canonical event the server publishes, in one durable log. The log's
 * `seq` is each SSE frame's `id:`: gap-free, growing across restarts, so a
 * client that reconnects with `Last-Event-ID` is replayed exactly what it
 * missed, from disk, whatever the server held in memory.
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import { Canonical } from "@skein/protocol"
import { SqlEventLog, SqlStore } from "@skein/sql"
import { EventLog } from "@skein/store"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type * as SubscriptionRef from "effect/SubscriptionRef"

/** One logged event and the directory of the session it belongs to. */
export const Envelope = Schema.Struct({
  directory: Schema.String,
  payload: Schema.Struct({ type: Schema.String, properties: Schema.Unknown })
})
export type Envelope = typeof Envelope.Type

export type Record = EventLog.Record<Envelope>

/** The records one kind of subscriber gets: one directory's or all (`undefined`), with the legacy types or not. */
export interface Filter {
  readonly directory: string | undefined
  readonly canonicalOnly: boolean
}

/** How many records matching a filter this server published, and the seq after the last one counted. */
export interface Published {
  readonly next: number
  readonly count: number
}

/**
 * Receives each chunk of the log after the seq it attached at, as a plain
 * call: `false` lets go (its buffer is full, or it closed); an effect (the
 * client's progress to publish) runs once every client has the chunk.
 */
export type Deliver = (records: Chunk.Chunk<Record>) => boolean | Effect.Effect<boolean>

/**
 * One follower of the log for every live SSE client: each chunk is read
 * once and handed to every attached client in turn, by a plain call per
 * client (no effect per client per chunk), so 200 clients cost 200 calls per
 * chunk, not 200 followers. A client catches up on its own
 * (`follow`) and attaches once it holds everything the feed has handed out.
 */
export interface LiveFeed {
  /**
   * Attaches `deliver` if `through` (the newest seq the client holds) is at
   * least the newest seq the feed handed out; the returned effect completes
   * once it is let go (or the feed ended). `undefined`: not caught up.
   */
  readonly tryAttach: (through: number, deliver: Deliver) => Effect.Effect<void> | undefined
}

export class ServerEvents extends Context.Tag("@skein/serve/ServerEvents")<ServerEvents, {
  readonly publish: (
    directory: string,
    events: ReadonlyArray<Canonical.CanonicalEvent>
  ) => Effect.Effect<ReadonlyArray<Record>, EventLog.EventLogError>
  /** Records from `from` on, then live: no gap, no duplicate. */
  readonly follow: (from: number) => Stream.Stream<Record, EventLog.EventLogError>
  readonly nextSeq: Effect.Effect<number>
  /** The log's incarnation: SSE ids are `<epoch>-<seq>`, so a cursor of a wiped or replaced log is known as foreign. */
  readonly epoch: string
  /**
   * Records this server published that match the filter: a subscriber's lag
   * counts only what it would get, not the legacy records a canonical
   * client skips nor another directory's. `next` and `count` move together.
   */
  readonly published: (filter: Filter) => Effect.Effect<Published>
  readonly firstSeq: Effect.Effect<number, EventLog.EventLogError>
  /** A connected subscriber's progress (the highest seq it has written), for `delivered`; until the scope closes. */
  readonly track: (delivered: SubscriptionRef.SubscriptionRef<number>) => Effect.Effect<void, never, Scope.Scope>
  /**
   * Waits until every connected subscriber has written what the log holds
   * now, or `within` passed. A synchronous prompt answers after it: a
   * client that subscribed before it prompted has the turn's events first.
   */
  readonly delivered: (within: Duration.DurationInput) => Effect.Effect<void>
  readonly live: LiveFeed
}>() {}

export interface Options {
  /** The log's folder, e.g. `<config>/skein/serve/events`. */
  readonly dir: string
  readonly retention?: EventLog.Retention | undefined
  readonly segmentBytes?: number | undefined
}

export const make = Effect.fn("ServerEvents.make")(function*(options: Options) {
  // With a SQL store configured (`--store`), the log is rows any machine can replay; else segment files.
  const store = yield* Effect.serviceOption(SqlStore.SqlStore)
  const log = Option.isSome(store)
    ? yield* SqlEventLog.open({ name: "serve", schema: Envelope, retention: options.retention }).pipe(
      Effect.provideService(SqlStore.SqlStore, store.value)
    )
    : yield* EventLog.open({
      dir: options.dir,
      schema: Envelope,
      retention: options.retention,
      segmentBytes: options.segmentBytes
    })
  const subscribers = new Set<SubscriptionRef.SubscriptionRef<number>>()
  const tally = makeTally(yield* log.nextSeq)
  const live = yield* makeLiveFeed(log.follow, yield* log.nextSeq)
  return ServerEvents.of({
    live,
    publish: (directory, events) =>
      events.length === 0
        ? Effect.succeed([])
        : log.appendAll(events.map((payload) => ({ directory, payload }))).pipe(Effect.tap((records) => Effect.sync(() => tally.add(records)))),
    follow: (from) => log.follow(from),
    nextSeq: log.nextSeq,
    epoch: log.epoch,
    published: (filter) => Effect.sync(() => tally.get(filter)),
    firstSeq: log.firstSeq,
    track: (delivered) =>
      Effect.acquireRelease(Effect.sync(() => subscribers.add(delivered)), () => Effect.sync(() => subscribers.delete(delivered))),
    delivered: (within) =>
      Effect.flatMap(log.nextSeq, (next) =>
        Effect.forEach(
          Array.from(subscribers),
          (delivered) => delivered.changes.pipe(Stream.takeUntil((seq) => seq >= next - 1), Stream.runDrain),
          { concurrency: "unbounded", discard: true }
        )).pipe(
          Effect.timeoutOption(within),
          // Written is not yet read: the client parses the stream while the answer arrives on another socket.
          Effect.zipRight(subscribers.size === 0 ? Effect.void : Effect.sleep("50 millis"))
        )
  })
})

/** The shared follower behind `live`, until the scope closes; a feed that fails lets every client go (they follow on their own). */
const makeLiveFeed = (follow: (from: number) => Stream.Stream<Record, EventLog.EventLogError>, next: number) =>
  Effect.gen(function*() {
    const attached = new Map<Deliver, Deferred.Deferred<void>>()
    let last = next - 1
    let ended = false
    const releaseNow = (deliver: Deliver) => {
      const done = attached.get(deliver)
      attached.delete(deliver)
      if (done !== undefined) Deferred.unsafeDone(done, Exit.void)
    }
    const release = (deliver: Deliver) => Effect.sync(() => releaseNow(deliver))
    const hand = (chunk: Chunk.Chunk<Record>) =>
      Effect.suspend(() => {
        if (Chunk.isEmpty(chunk)) return Effect.void
        // Before handing out: a client that attaches meanwhile holds this chunk already.
        last = Chunk.unsafeLast(chunk).seq
        const after: Array<Effect.Effect<void>> = []
        for (const deliver of Array.from(attached.keys())) {
          const more = deliver(chunk)
          if (more === false) releaseNow(deliver)
          else if (more !== true) after.push(Effect.flatMap(more, (go) => go ? Effect.void : release(deliver)))
        }
        return after.length === 0 ? Effect.void : Effect.all(after, { discard: true })
      })
    const endAll = Effect.suspend(() => {
      ended = true
      return Effect.forEach(Array.from(attached.keys()), release, { discard: true })
    })
    yield* follow(next).pipe(
      Stream.chunks,
      Stream.runForEach(hand),
      Effect.ignore,
      Effect.ensuring(endAll),
      Effect.forkScoped
    )
    return {
      tryAttach: (through, deliver) => {
        if (ended || through < last) return undefined
        const done = Deferred.unsafeMake<void>(FiberId.none)
        attached.set(deliver, done)
        return Deferred.await(done).pipe(Effect.onInterrupt(() => Effect.sync(() => attached.delete(deliver))))
      }
    } satisfies LiveFeed
  })

interface Counts {
  all: number
  canonical: number
}

/** Counts of the records published since the server started, in all and per directory. */
const makeTally = (start: number) => {
  let next = start
  const total: Counts = { all: 0, canonical: 0 }
  const byDirectory = new Map<string, Counts>()
  const count = (counts: Counts, canonical: boolean) => {
    counts.all++
    if (canonical) counts.canonical++
  }
  return {
    add: (records: ReadonlyArray<Record>) => {
      for (const record of records) {
        const { directory, payload } = record.message
        const canonical = !Canonical.legacyEventTypes.has(payload.type)
        let counts = byDirectory.get(directory)
        if (counts === undefined) byDirectory.set(directory, counts = { all: 0, canonical: 0 })
        count(total, canonical)
        count(counts, canonical)
        next = Math.max(next, record.seq + 1)
      }
    },
    get: (filter: Filter): Published => {
      const counts = filter.directory === undefined ? total : byDirectory.get(filter.directory)
      const n = counts === undefined ? 0 : filter.canonicalOnly ? counts.canonical : counts.all
      return { next, count: n }
    }
  }
}

export const layer = (options: Options): Layer.Layer<ServerEvents, EventLog.EventLogError, FileSystem.FileSystem> =>
  Layer.scoped(ServerEvents, make(options))

/** The envelope's id inside the JSON, as opencode puts it: `evt_` and the seq, so ids sort. */
export const eventId = (seq: number): string => `evt_${seq.toString(16).padStart(12, "0")}`
