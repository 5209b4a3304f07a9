/**
 * The rows of an SQL event log as an append writes them.
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { SqlStore } from "../SqlStore.js"

export const Int = Schema.Union(Schema.Number, Schema.NumberFromString)
export const Bound = Schema.Array(Schema.Struct({ value: Schema.NullOr(Int) }))

/**
 * Inserts the rows after the log's last seq and wakes the other processes'
 * followers; the first row's seq. On Postgres one statement (one round
 * trip, its own transaction): the rows, numbered from the table's last seq,
 * and the `NOTIFY` sent at its commit.
 */
export const insert = (
  store: SqlStore["Type"],
  channel: string,
  name: string,
  encoded: ReadonlyArray<string>,
  at: number,
  nextSeq: number
): Effect.Effect<number, unknown> => {
  const sql = store.sql
  return store.dialect === "pg"
    ? Effect.flatMap(
      sql`WITH last AS (SELECT GREATEST(COALESCE(MAX(seq), 0), ${nextSeq - 1}) AS seq FROM skein_events WHERE log = ${name}),
        added AS (
          INSERT INTO skein_events (log, seq, at, bytes, message)
          SELECT ${name}, last.seq + v.i, ${at}, octet_length(v.message), v.message
          FROM last, jsonb_array_elements_text(${JSON.stringify(encoded)}::jsonb) WITH ORDINALITY AS v(message, i)
          RETURNING seq
        )
        SELECT MIN(seq) AS value, pg_notify(${channel}, ${
        carried(encoded)
          ? sql`json_build_object('log', ${name}::text, 'first', MIN(seq), 'at', ${at}::bigint, 'messages', ${JSON.stringify(encoded)}::jsonb)::text`
          : sql`${name}::text`
      }) FROM added`,
      Schema.decodeUnknown(Bound)
    ).pipe(Effect.map((rows) => rows[0]!.value!))
    : sql.withTransaction(Effect.gen(function*() {
      const max = yield* Effect.flatMap(
        sql`SELECT MAX(seq) AS value FROM skein_events WHERE log = ${name}`,
        Schema.decodeUnknown(Bound)
      )
      const first = Math.max(nextSeq, (max[0]?.value ?? 0) + 1)
      const rows = encoded.map((message, i) => ({ log: name, seq: first + i, at, bytes: Buffer.byteLength(message), message }))
      yield* sql`INSERT INTO skein_events ${sql.insert(rows)}`
      yield* store.notify(channel, name)
      return first
    }))
}

/** Postgres refuses a NOTIFY payload of 8000 bytes or more: a larger append wakes followers with its log's name only. */
export const carried = (encoded: ReadonlyArray<string>) => {
  let bytes = 200
  for (const message of encoded) bytes += Buffer.byteLength(message) * 1.1 + 4
  return bytes < 7500
}
