/**
 * The connection every SQL-backed part of skein shares: one client over
 * `sqlite:<file>` or `postgres://…`, migrated when the layer starts. The
 * layer fails with one `StoreUnavailable` naming the URL (password
 * redacted) when the database cannot be reached, rather than on the first
 * append later.
 *
 * Postgres also offers `LISTEN/NOTIFY`, which the event log uses to wake
 * its followers; sqlite has none, so followers there poll with a bound.
 *
 * @since 0.0.0
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Migrations from "./internal/migrations.js"
import { type BadStoreUrl, reasonOf, StoreUnavailable } from "./SqlStoreError.js"
import * as StoreUrl from "./StoreUrl.js"

/**
 * @since 0.0.0
 */
export class SqlStore extends Context.Tag("@skein/sql/SqlStore")<SqlStore, {
  readonly url: StoreUrl.StoreUrl
  readonly dialect: "sqlite" | "pg"
  readonly sql: SqlClient.SqlClient
  /** Payloads sent on a channel (Postgres `LISTEN`); undefined on sqlite, whose followers poll. */
  readonly listen: ((channel: string) => Stream.Stream<string, SqlError>) | undefined
  /** Wakes other processes' listeners (Postgres `pg_notify`, sent when the caller's transaction commits); nothing on sqlite. */
  readonly notify: (channel: string, payload: string) => Effect.Effect<void, SqlError>
}>() {}

/**
 * @since 0.0.0
 */
export interface Options {
  /** How long to wait for the database at start. Default 5 seconds. */
  readonly connectTimeout?: Duration.DurationInput | undefined
}

interface Connected {
  readonly client: SqlClient.SqlClient
  readonly listen: SqlStore["Type"]["listen"]
  readonly notify: SqlStore["Type"]["notify"]
}

const clientFor = (url: StoreUrl.StoreUrl, options: Options): Effect.Effect<Connected, StoreUnavailable | SqlError, Scope.Scope | Reactivity.Reactivity> =>
  url._tag === "Sqlite"
    ? Effect.gen(function*() {
      yield* Effect.try({
        try: () => Fs.mkdirSync(Path.dirname(url.filename), { recursive: true, mode: 0o700 }),
        catch: (cause) => new StoreUnavailable({ url: StoreUrl.display(url), reason: reasonOf(cause) })
      })
      const client = yield* SqliteClient.make({ filename: url.filename })
      // WAL (the client's default) with NORMAL sync: a commit is not an fsync, and a crash never corrupts
      // the file (a power loss may lose the last commits). The CLI's own transcript stays the primary copy.
      yield* client`PRAGMA synchronous = NORMAL`
      return { client, listen: undefined, notify: () => Effect.void } satisfies Connected
    })
    : Effect.map(
      PgClient.make({
        url: url.url,
        connectTimeout: options.connectTimeout ?? Duration.seconds(5),
        applicationName: "skein",
        // Kept open once made, not closed after 10 s idle: a prompt's path runs its writes side by side, and a
        // connection made on the way costs more than the write.
        minConnections: 4
      }),
      // `pg_notify` in a statement joins the caller's transaction: one commit for the rows and the wake.
      (client): Connected => ({ client, listen: client.listen, notify: (channel, payload) => Effect.asVoid(client`SELECT pg_notify(${channel}, ${payload})`) })
    )

/**
 * Runs a Migrator's effect that several servers may start at once on a fresh
 * database: the Migrator looks for its own table, then creates it, which is
 * not atomic, so the loser fails (`relation … already exists`, or a duplicate
 * key in Postgres's catalog). It tries again and finds the table made; the
 * Migrator's lock on that table orders the rest.
 *
 * @since 0.1.0
 */
export const retryMigrationRace = <A, E, R>(migrate: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.retry(migrate, { times: 5, schedule: Schedule.spaced("200 millis") })

/**
 * Connects and migrates in the current scope.
 *
 * @since 0.0.0
 */
export const make = Effect.fn("SqlStore.make")(function*(url: StoreUrl.StoreUrl, options: Options = {}) {
  const unavailable = (cause: unknown) => new StoreUnavailable({ url: StoreUrl.display(url), reason: reasonOf(cause) })
  const { client, listen, notify } = yield* clientFor(url, options).pipe(
    Effect.provide(Reactivity.layer),
    Effect.mapError((e) => e instanceof StoreUnavailable ? e : unavailable(e))
  )
  yield* Migrations.run.pipe(Effect.provideService(SqlClient.SqlClient, client), retryMigrationRace, Effect.mapError(unavailable))
  return SqlStore.of({ url, dialect: url._tag === "Sqlite" ? "sqlite" : "pg", sql: client, listen, notify })
}) satisfies (url: StoreUrl.StoreUrl, options?: Options) => Effect.Effect<SqlStore["Type"], StoreUnavailable, Scope.Scope>

/**
 * The store at `url` (`sqlite:<file>` or `postgres://…`), with its `SqlClient`.
 *
 * @since 0.0.0
 */
export const layer = (
  url: string | StoreUrl.StoreUrl,
  options?: Options
): Layer.Layer<SqlStore | SqlClient.SqlClient, StoreUnavailable | BadStoreUrl> =>
  Layer.unwrapScoped(Effect.gen(function*() {
    const parsed = typeof url === "string" ? yield* StoreUrl.parse(url) : url
    const store = yield* make(parsed, options)
    return Layer.merge(Layer.succeed(SqlStore, store), Layer.succeed(SqlClient.SqlClient, store.sql))
  }))
