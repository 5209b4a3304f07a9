/**
 * Which prompts' turns have started, as rows: a prompt is a persisted
 * message, delivered at least once, so a runner that takes over a session
 * must know whether the dead runner had already sent it to the CLI. A turn
 * is recorded before its prompt reaches the CLI; a prompt whose row exists
 * is never sent again.
 *
 * The table is the cluster's own, migrated with its own migrations table,
 * so it never collides with `@skein/sql`'s schema.
 *
 * @since 0.1.0
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlStore, SqlStoreError } from "@skein/sql"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/**
 * @since 0.1.0
 */
export class TurnLedger extends Context.Tag("@skein/cluster/TurnLedger")<TurnLedger, {
  /** Records the turn's start; `false` when it had started already (a redelivery). */
  readonly start: (sessionID: string, messageID: string, runner: string) => Effect.Effect<boolean, SqlStoreError.StoreFailed>
  /** The turn has ended, and how (a turn's end is recorded once). */
  readonly end: (sessionID: string, messageID: string, outcome: Outcome) => Effect.Effect<void, SqlStoreError.StoreFailed>
  /** How the turn ended; `undefined` while it is open (or never started). */
  readonly outcome: (sessionID: string, messageID: string) => Effect.Effect<Outcome | undefined, SqlStoreError.StoreFailed>
  /** Sessions with a turn started and not ended, on whichever runner: the cluster's busy sessions. */
  readonly busy: Effect.Effect<ReadonlyArray<string>, SqlStoreError.StoreFailed>
}>() {}

/**
 * How a turn ended: `answered` (the CLI gave its reply), `failed` (the turn
 * failed, its error published), `lost` (cut: its runner died or stopped, or
 * its shard moved before it could finish).
 *
 * @since 0.1.0
 */
export type Outcome = "answered" | "failed" | "lost"

const outcomes: ReadonlyArray<string> = ["answered", "failed", "lost"] satisfies ReadonlyArray<Outcome>

const isOutcome = (u: unknown): u is Outcome => typeof u === "string" && outcomes.includes(u)

const init = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE skein_cluster_turns (
    session_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    runner TEXT NOT NULL,
    started BIGINT NOT NULL,
    ended BIGINT,
    PRIMARY KEY (session_id, message_id)
  )`
})

/** The open turns are few among all: `busy` reads them from a partial index. */
const openTurns = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX skein_cluster_turns_open ON skein_cluster_turns (session_id) WHERE ended IS NULL`
})

/** A turn's outcome: a redelivered prompt whose turn was answered (before its shard moved) is not lost. */
const turnOutcome = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE skein_cluster_turns ADD COLUMN outcome TEXT`
})

/**
 * The cluster's migrations, run by `make`.
 *
 * @since 0.1.0
 */
export const migrate = Migrator.make({})({
  loader: Migrator.fromRecord({ "0001_turns": init, "0002_open_turns": openTurns, "0003_turn_outcome": turnOutcome }),
  table: "skein_cluster_migrations"
})

/**
 * @since 0.1.0
 */
export const make = Effect.gen(function*() {
  const { sql } = yield* SqlStore.SqlStore
  const failed = (operation: string) => (cause: unknown) =>
    new SqlStoreError.StoreFailed({ operation: `turns ${operation}`, reason: SqlStoreError.reasonOf(cause) })
  yield* migrate.pipe(Effect.provideService(SqlClient.SqlClient, sql), SqlStore.retryMigrationRace, Effect.mapError(failed("migrate")))
  return TurnLedger.of({
    start: (sessionID, messageID, runner) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        sql`INSERT INTO skein_cluster_turns (session_id, message_id, runner, started)
          VALUES (${sessionID}, ${messageID}, ${runner}, ${now})
          ON CONFLICT (session_id, message_id) DO NOTHING RETURNING message_id`).pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.mapError(failed("start"))
        ),
    end: (sessionID, messageID, outcome) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        sql`UPDATE skein_cluster_turns SET ended = ${now}, outcome = ${outcome}
          WHERE session_id = ${sessionID} AND message_id = ${messageID} AND ended IS NULL`).pipe(
          Effect.asVoid,
          Effect.mapError(failed("end"))
        ),
    outcome: (sessionID, messageID) =>
      sql<{ readonly outcome: string | null }>`SELECT outcome FROM skein_cluster_turns
        WHERE session_id = ${sessionID} AND message_id = ${messageID} AND ended IS NOT NULL`.pipe(
        Effect.map((rows) => {
          const outcome = rows[0]?.outcome
          // A turn ended before outcomes were recorded was lost or failed: either way not answered.
          return rows.length === 0 ? undefined : isOutcome(outcome) ? outcome : "lost"
        }),
        Effect.mapError(failed("outcome"))
      ),
    busy: sql<{ readonly session_id: string }>`SELECT DISTINCT session_id FROM skein_cluster_turns WHERE ended IS NULL`.pipe(
      Effect.map((rows) => rows.map((row) => row.session_id)),
      Effect.mapError(failed("busy"))
    )
  })
})

/**
 * @since 0.1.0
 */
export const layer: Layer.Layer<TurnLedger, SqlStoreError.StoreFailed, SqlStore.SqlStore> = Layer.effect(TurnLedger, make)
