/**
 * The store's schema, one migration per change, run by @effect/sql's
 * Migrator when the layer starts. Columns that differ by dialect (bytes,
 * big integers) go through `onDialectOrElse`.
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

const init = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const bytes = sql.onDialectOrElse({ pg: () => sql.literal("BYTEA"), orElse: () => sql.literal("BLOB") })
  yield* sql`CREATE TABLE skein_event_logs (
    name TEXT PRIMARY KEY,
    epoch TEXT NOT NULL,
    created BIGINT NOT NULL
  )`
  yield* sql`CREATE TABLE skein_events (
    log TEXT NOT NULL,
    seq BIGINT NOT NULL,
    at BIGINT NOT NULL,
    bytes INTEGER NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (log, seq)
  )`
  yield* sql`CREATE TABLE skein_transcript_files (
    cli_session_id TEXT NOT NULL,
    path TEXT NOT NULL,
    session_id TEXT,
    kind TEXT NOT NULL,
    size BIGINT NOT NULL,
    updated BIGINT NOT NULL,
    PRIMARY KEY (cli_session_id, path)
  )`
  yield* sql`CREATE TABLE skein_transcript_chunks (
    cli_session_id TEXT NOT NULL,
    path TEXT NOT NULL,
    byte_offset BIGINT NOT NULL,
    data ${bytes} NOT NULL,
    PRIMARY KEY (cli_session_id, path, byte_offset)
  )`
  yield* sql`CREATE TABLE skein_sessions (
    session_id TEXT PRIMARY KEY,
    cli_session_id TEXT NOT NULL,
    directory TEXT NOT NULL,
    title TEXT NOT NULL,
    created BIGINT NOT NULL,
    updated BIGINT NOT NULL,
    parent_id TEXT
  )`
  yield* sql`CREATE INDEX skein_sessions_directory ON skein_sessions (directory)`
  yield* sql`CREATE TABLE skein_asks (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    cli_session_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    directory TEXT NOT NULL,
    request TEXT NOT NULL,
    host TEXT NOT NULL,
    opened BIGINT NOT NULL,
    closed BIGINT,
    reply TEXT,
    reason TEXT
  )`
  yield* sql`CREATE INDEX skein_asks_open ON skein_asks (closed)`
})

export const loader = Migrator.fromRecord({ "0001_init": init })

export const run = Migrator.make({})({ loader, table: "skein_migrations" })
