/**
 * Which sessions' CLIs run, cluster-wide. Each runner publishes its own
 * live sessions as one row (`skein_cluster_running`, keyed by the runner's
 * incarnation) every second, with the database's time; an edge lists its
 * own runner's live sessions and every other runner's row fresher than the
 * expiry. A runner that stops deletes its row; one that dies stops beating,
 * and its row drops out of the listing after the expiry (its sessions, if
 * resumed elsewhere, are listed by their new runner).
 *
 * The database's clock, not each runner's, dates the rows, so runners whose
 * clocks disagree still see each other.
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlStore, SqlStoreError } from "@skein/sql"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { RunnerSessions } from "../RunnerSessions.js"

export class RunningSessions extends Context.Tag("@skein/cluster/RunningSessions")<RunningSessions, {
  /** This runner's live sessions and those every other live runner last published. */
  readonly all: Effect.Effect<ReadonlyArray<string>>
}>() {}

export interface Options {
  /** How often a runner publishes its live sessions. Default 1 s. */
  readonly interval?: Duration.DurationInput | undefined
  /** A row not refreshed for this long is a dead runner's. Default 5 s. */
  readonly expiry?: Duration.DurationInput | undefined
}

const init = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE skein_cluster_running (
    runner TEXT PRIMARY KEY,
    sessions TEXT NOT NULL,
    beat BIGINT NOT NULL
  )`
})

const migrate = Migrator.make({})({
  loader: Migrator.fromRecord({ "0001_running": init }),
  table: "skein_cluster_running_migrations"
})

const Sessions = Schema.parseJson(Schema.Array(Schema.String))
const decodeSessions = Schema.decodeUnknown(Sessions)

export const make = Effect.fn("RunningSessions.make")(function*(options: Options = {}) {
  const { sql, dialect } = yield* SqlStore.SqlStore
  const { registry: local, runner } = yield* RunnerSessions
  const failed = (operation: string) => (cause: unknown) =>
    new SqlStoreError.StoreFailed({ operation: `running sessions ${operation}`, reason: SqlStoreError.reasonOf(cause) })
  yield* migrate.pipe(Effect.provideService(SqlClient.SqlClient, sql), SqlStore.retryMigrationRace, Effect.mapError(failed("migrate")))

  /** The database's time in milliseconds. */
  const now = sql.literal(
    dialect === "pg"
      ? "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
      : "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
  )
  const expiry = Duration.toMillis(Duration.decode(options.expiry ?? Duration.seconds(5)))

  const publish = Effect.flatMap(local.running, (ids) =>
    sql`INSERT INTO skein_cluster_running (runner, sessions, beat) VALUES (${runner}, ${JSON.stringify(ids)}, ${now})
      ON CONFLICT (runner) DO UPDATE SET sessions = excluded.sessions, beat = excluded.beat`).pipe(
      Effect.mapError(failed("publish")),
      Effect.catchAll((error) => Effect.logWarning("publishing this runner's live sessions", error))
    )
  // Rows of runners long dead (each incarnation has its own row) are cleared as a runner starts.
  yield* sql`DELETE FROM skein_cluster_running WHERE beat < ${now} - ${expiry * 12}`.pipe(
    Effect.catchAll((error) => Effect.logWarning("clearing dead runners' rows", error))
  )
  // Added before the beat, so run after it is interrupted: no beat follows the withdrawal.
  yield* Effect.addFinalizer(() =>
    sql`DELETE FROM skein_cluster_running WHERE runner = ${runner}`.pipe(
      Effect.catchAll((error) => Effect.logWarning("withdrawing this runner's live sessions", error))
    )
  )
  yield* Effect.forkScoped(Effect.repeat(publish, Schedule.spaced(options.interval ?? Duration.seconds(1))))

  const elsewhere = sql<{ readonly sessions: string }>`SELECT sessions FROM skein_cluster_running
    WHERE runner <> ${runner} AND beat > ${now} - ${expiry}`.pipe(
    Effect.flatMap(Effect.forEach((row) => decodeSessions(row.sessions))),
    Effect.map((all) => all.flat()),
    Effect.mapError(failed("list")),
    Effect.catchAll((error) => Effect.as(Effect.logWarning("listing other runners' live sessions", error), []))
  )

  return RunningSessions.of({
    all: Effect.map(Effect.zip(local.running, elsewhere, { concurrent: true }), ([here, there]) => [...new Set([...here, ...there])])
  })
})

export const layer = (options?: Options): Layer.Layer<RunningSessions, SqlStoreError.StoreFailed, SqlStore.SqlStore | RunnerSessions> =>
  Layer.scoped(RunningSessions, make(options))

/** A single runner is the whole cluster: its own live sessions are all there are, and nothing is published. */
export const layerSingle: Layer.Layer<RunningSessions, never, RunnerSessions> = Layer.effect(
  RunningSessions,
  Effect.map(RunnerSessions, ({ registry }) => RunningSessions.of({ all: registry.running }))
)
