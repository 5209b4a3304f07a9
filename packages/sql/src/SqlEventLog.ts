/**
 * store's `EventLog` over SQL rows: the same interface (append, a `seq` that
 * only grows across restarts, read from a seq, follow, retention, an epoch
 * per incarnation), so serve's SSE ids and `Last-Event-ID` replay work the
 * same from a table as from segment files.
 *
 * One row a record in `skein_events (log, seq, at, bytes, message)`. The
 * log's epoch is a row of `skein_event_logs`, made at the first open:
 * wiping the tables gives the next open a new epoch. Followers read rows
 * from their cursor and, with nothing new, wait for a wake: an append in
 * this process, a Postgres `NOTIFY` from another one, or (sqlite, which
 * has no notifications) the poll bound.
 *
 * Several processes may append to one log (the runners of a cluster): each
 * append takes the next seq from the table in its transaction, and one
 * that collides with another writer's is tried again after it.
 *
 * @since 0.0.0
 */
import { EventLog } from "@skein/store"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as EventRows from "./internal/eventRows.js"
import * as RecentRecords from "./internal/recentRecords.js"
import { reasonOf } from "./SqlStoreError.js"
import { SqlStore } from "./SqlStore.js"

/**
 * @since 0.0.0
 */
export interface Options<A, I> {
  /** The log's name, e.g. `serve` or a session id; one table holds every log. */
  readonly name: string
  readonly schema: Schema.Schema<A, I>
  readonly retention?: EventLog.Retention | undefined
  /** How long a sqlite follower waits before it looks again. Default 100 ms. */
  readonly pollInterval?: Duration.DurationInput | undefined
  /** Rows a read fetches at a time. Default 500. */
  readonly batch?: number | undefined
}

/** A follower's read that failed is tried again (capped at every 2 s) for up to 5 minutes. */
const followRetry = Schedule.exponential("100 millis").pipe(Schedule.union(Schedule.spaced("2 seconds")), Schedule.upTo("5 minutes"))

/** The channel Postgres wakes followers on; the payload is the log's name. */
export const channel = "skein_events"

const Row = Schema.Struct({ seq: EventRows.Int, at: EventRows.Int, message: Schema.String })
const Rows = Schema.Array(Row)
const Epochs = Schema.Array(Schema.Struct({ epoch: Schema.String }))

/**
 * Opens (or creates) the log `name` in the current scope. `seq` continues
 * from the last row.
 *
 * @since 0.0.0
 */
export const open = Effect.fn("SqlEventLog.open")(function*<A, I>(
  options: Options<A, I>
): Effect.fn.Return<EventLog.EventLog<A>, EventLog.EventLogError, SqlStore | Scope.Scope> {
  const store = yield* SqlStore
  const sql = store.sql
  const name = options.name
  const where = `sql:${name}`
  const fail = (cause: unknown) =>
    new EventLog.EventLogError({ path: where, message: reasonOf(cause) })
  const query = <X>(effect: Effect.Effect<X, unknown>) => Effect.mapError(effect, fail)
  const batch = options.batch ?? 500
  const poll = Duration.decode(options.pollInterval ?? "100 millis")
  const encodeMessage = Schema.encode(Schema.parseJson(options.schema))
  const decodeMessage = Schema.decode(Schema.parseJson(options.schema))

  const epoch = yield* query(Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    yield* sql`INSERT INTO skein_event_logs (name, epoch, created) VALUES (${name}, ${EventLog.newEpoch()}, ${now})
      ON CONFLICT (name) DO NOTHING`
    const rows = yield* Effect.flatMap(sql`SELECT epoch FROM skein_event_logs WHERE name = ${name}`, Schema.decodeUnknown(Epochs))
    return rows[0]!.epoch
  }))
  const bound = (aggregate: "MIN" | "MAX") =>
    Effect.flatMap(
      sql`SELECT ${sql.literal(aggregate)}(seq) AS value FROM skein_events WHERE log = ${name}`,
      Schema.decodeUnknown(EventRows.Bound)
    ).pipe(Effect.map((rows) => rows[0]?.value ?? undefined), query)

  let nextSeq = ((yield* bound("MAX")) ?? 0) + 1
  // Bumped by every append here and every NOTIFY for this log: a follower with nothing to read waits for it to move.
  const wake = yield* SubscriptionRef.make(0)
  const bump = SubscriptionRef.update(wake, (n) => n + 1)
  const recent = RecentRecords.make<A>()
  /** A NOTIFY of this log: its rows, when it carries them, are kept for the followers. */
  const notified = (payload: string) =>
    payload === name ? bump : Effect.flatMap(RecentRecords.decodeNotification(payload), (n) =>
      n.log !== name ? Effect.void : recent.has(n.first) ? bump : Effect.zipRight(
        Effect.forEach(n.messages, (message, i) =>
          Effect.map(decodeMessage(message), (decoded) => recent.add({ seq: n.first + i, at: n.at, message: decoded }))
        ).pipe(Effect.ignore),
        bump
      ))
  if (store.listen !== undefined) {
    yield* store.listen(channel).pipe(
      Stream.runForEach(notified),
      // A lost listen connection is opened again; meanwhile the poll bound still wakes followers.
      Effect.retry(Schedule.spaced("1 second")),
      Effect.forkScoped
    )
  }

  const rowsFrom = (from: number, to: number | undefined) =>
    Effect.flatMap(
      to === undefined
        ? sql`SELECT seq, at, message FROM skein_events WHERE log = ${name} AND seq >= ${from} ORDER BY seq LIMIT ${batch}`
        : sql`SELECT seq, at, message FROM skein_events WHERE log = ${name} AND seq >= ${from} AND seq < ${to} ORDER BY seq LIMIT ${batch}`,
      Schema.decodeUnknown(Rows)
    ).pipe(
      Effect.flatMap(Effect.forEach((row) => Effect.map(decodeMessage(row.message), (message): EventLog.Record<A> => ({ seq: row.seq, at: row.at, message })))),
      query
    )

  const lock = yield* Effect.makeSemaphore(1)
  let sincePrune = 0
  const prune = pruneFor(store, name, options.retention)
  yield* query(prune)

  const appendAll = (messages: ReadonlyArray<A>) =>
    lock.withPermits(1)(Effect.gen(function*() {
      if (messages.length === 0) return []
      const at = yield* Clock.currentTimeMillis
      const encoded = yield* query(Effect.forEach(messages, (message) => encodeMessage(message)))
      // Other processes may append to the same log (cluster runners share it): the seq continues from the
      // table, read in the insert's statement (or transaction); one that took the same seq first makes this
      // insert collide, and it is tried again after it.
      const first = yield* query(EventRows.insert(store, channel, name, encoded, at, nextSeq).pipe(Effect.retry({ times: 8, schedule: Schedule.spaced("5 millis") })))
      nextSeq = first
      const records = messages.map((message, i): EventLog.Record<A> => ({ seq: nextSeq + i, at, message }))
      nextSeq += records.length
      if (EventRows.carried(encoded)) for (const record of records) recent.add(record)
      yield* bump
      sincePrune += records.length
      if (sincePrune >= 256 && options.retention !== undefined) {
        sincePrune = 0
        yield* query(prune)
      }
      return records
    }))

  const read = (from = 1, to?: number): Stream.Stream<EventLog.Record<A>, EventLog.EventLogError> =>
    Stream.suspend(() => {
      const end = to ?? nextSeq
      return Stream.paginateChunkEffect(from, (cursor) =>
        Effect.map(rowsFrom(cursor, end), (records) => {
          const last = records.at(-1)
          return [Chunk.unsafeFromArray(records), last === undefined || last.seq + 1 >= end ? Option.none() : Option.some(last.seq + 1)] as const
        }))
    })

  const follow = (from = 1): Stream.Stream<EventLog.Record<A>, EventLog.EventLogError> =>
    Stream.paginateChunkEffect(from, (cursor) =>
      Effect.gen(function*() {
        const seen = yield* SubscriptionRef.get(wake)
        // A follower outlives a database restart: its reads are tried again, and it goes on from its cursor.
        // What was just appended (here, or by another process whose NOTIFY carried it) needs no read.
        const records = recent.from(cursor, batch) ?? (yield* Effect.retry(rowsFrom(cursor, undefined), followRetry))
        const last = records.at(-1)
        if (last !== undefined) return [Chunk.unsafeFromArray(records), Option.some(last.seq + 1)] as const
        yield* wake.changes.pipe(
          Stream.filter((n) => n !== seen),
          Stream.take(1),
          Stream.runDrain,
          Effect.timeoutOption(poll)
        )
        return [Chunk.empty<EventLog.Record<A>>(), Option.some(cursor)] as const
      }))

  return {
    dir: where,
    epoch,
    append: (message) => Effect.map(appendAll([message]), (records) => records[0]!),
    appendAll,
    // Another writer's rows count: a cursor one of them issued is not taken for a never-issued one.
    nextSeq: Effect.map(Effect.orElseSucceed(bound("MAX"), () => undefined), (max) => (nextSeq = Math.max(nextSeq, (max ?? 0) + 1))),
    firstSeq: Effect.map(bound("MIN"), (first) => first ?? nextSeq),
    read,
    follow,
    prune: lock.withPermits(1)(query(Effect.as(prune, [])))
  }
})

/** Deletes rows older than `maxAge` and the oldest rows past `maxBytes` of messages. */
const pruneFor = (store: SqlStore["Type"], name: string, retention: EventLog.Retention | undefined) =>
  Effect.gen(function*() {
    const sql = store.sql
    if (retention?.maxAge !== undefined) {
      const cutoff = (yield* Clock.currentTimeMillis) - Duration.toMillis(retention.maxAge)
      yield* sql`DELETE FROM skein_events WHERE log = ${name} AND at < ${cutoff}`
    }
    if (retention?.maxBytes !== undefined) {
      // The newest row at which the running total, newest first, passes the bound: it and everything older go.
      const rows = yield* Effect.flatMap(
        sql`SELECT seq AS value FROM (
          SELECT seq, SUM(bytes) OVER (ORDER BY seq DESC) AS total FROM skein_events WHERE log = ${name}
        ) t WHERE total > ${retention.maxBytes} ORDER BY seq DESC LIMIT 1`,
        Schema.decodeUnknown(EventRows.Bound)
      )
      const over = rows[0]?.value
      if (over !== undefined && over !== null) yield* sql`DELETE FROM skein_events WHERE log = ${name} AND seq <= ${over}`
    }
  })
