/**
 * The mirror's two tables as TranscriptMirror reads and writes them:
 * `skein_transcript_files` (one row per file: kind, mirrored size, when) and
 * `skein_transcript_chunks` (a file's bytes as rows at byte offsets).
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { SqlStore } from "../SqlStore.js"
import type { Target } from "../TranscriptMirror.js"
import type * as SessionFiles from "./sessionFiles.js"

type Store = SqlStore["Type"]

const Int = Schema.Union(Schema.Number, Schema.NumberFromString)
export const FileRows = Schema.Array(Schema.Struct({ path: Schema.String, kind: Schema.Literal("append", "whole"), size: Int, updated: Int }))
export const ChunkRows = Schema.Array(Schema.Struct({ path: Schema.String, byte_offset: Int, data: Schema.Uint8ArrayFromSelf }))
export const LastRows = Schema.Array(Schema.Struct({ byte_offset: Int, data: Schema.Uint8ArrayFromSelf }))

/** Rows per INSERT statement: a long file is written in slices. */
export const rowsPerInsert = 500

/** A run of a file's bytes at its offset: one line of a JSONL file, or a whole file. */
export interface Row {
  readonly offset: number
  readonly data: Buffer
}

/** The mirror's record of a session's files. */
export const files = (store: Store, cliSessionId: string) =>
  Effect.flatMap(
    store.sql`SELECT path, kind, size, updated FROM skein_transcript_files WHERE cli_session_id = ${cliSessionId} ORDER BY path`,
    Schema.decodeUnknown(FileRows)
  )

/** Every row of a file, in order. */
export const chunks = (store: Store, cliSessionId: string, path: string) =>
  Effect.flatMap(
    store.sql`SELECT path, byte_offset, data FROM skein_transcript_chunks
      WHERE cli_session_id = ${cliSessionId} AND path = ${path} ORDER BY byte_offset`,
    Schema.decodeUnknown(ChunkRows)
  )

/** The rows of a whole file (one, unless something went wrong). */
export const wholeRows = (store: Store, cliSessionId: string, path: string) =>
  Effect.flatMap(
    store.sql`SELECT byte_offset, data FROM skein_transcript_chunks WHERE cli_session_id = ${cliSessionId} AND path = ${path}`,
    Schema.decodeUnknown(LastRows)
  )

/** The last row of a file in the database, if any. */
export const lastRow = (store: Store, cliSessionId: string, path: string) =>
  Effect.map(
    Effect.flatMap(
      store.sql`SELECT byte_offset, data FROM skein_transcript_chunks
        WHERE cli_session_id = ${cliSessionId} AND path = ${path} ORDER BY byte_offset DESC LIMIT 1`,
      Schema.decodeUnknown(LastRows)
    ),
    (rows): Row | undefined => rows[0] === undefined ? undefined : { offset: rows[0].byte_offset, data: Buffer.from(rows[0].data) }
  )

export const insertChunks = (store: Store, cliSessionId: string, path: string, rows: ReadonlyArray<Row>) =>
  Effect.forEach(
    Array.from({ length: Math.ceil(rows.length / rowsPerInsert) }, (_, i) => rows.slice(i * rowsPerInsert, (i + 1) * rowsPerInsert)),
    (slice) =>
      store.sql`INSERT INTO skein_transcript_chunks ${
        store.sql.insert(slice.map((row) => ({ cli_session_id: cliSessionId, path, byte_offset: row.offset, data: row.data })))
      }`,
    { discard: true }
  )

const fileRow = (target: Target, file: SessionFiles.SessionFile, size: number, now: number) => ({
  cli_session_id: target.cliSessionId,
  path: file.path,
  session_id: target.sessionId ?? null,
  kind: file.kind,
  size,
  updated: now
})

/** Records the file's mirrored size: a new row, or the existing one updated. */
export const saveFile = (store: Store, target: Target, file: SessionFiles.SessionFile, size: number, isNew: boolean) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    isNew
      ? store.sql`INSERT INTO skein_transcript_files ${store.sql.insert(fileRow(target, file, size, now))}`
      : store.sql`UPDATE skein_transcript_files SET size = ${size}, updated = ${now} WHERE cli_session_id = ${target.cliSessionId} AND path = ${file.path}`)

/** The rows and the file's new size, in one statement on Postgres (a data-modifying CTE), else one transaction. */
export const writeAppend = (store: Store, target: Target, file: SessionFiles.SessionFile, rows: ReadonlyArray<Row>, size: number, isNew: boolean) => {
  const sql = store.sql
  return store.dialect !== "pg" || rows.length > rowsPerInsert
    ? sql.withTransaction(Effect.zipRight(insertChunks(store, target.cliSessionId, file.path, rows), saveFile(store, target, file, size, isNew)))
    : Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const chunks = sql.insert(rows.map((row) => ({ cli_session_id: target.cliSessionId, path: file.path, byte_offset: row.offset, data: row.data })))
      return isNew
        ? sql`WITH chunks AS (INSERT INTO skein_transcript_chunks ${chunks}) INSERT INTO skein_transcript_files ${
          sql.insert(fileRow(target, file, size, now))
        }`
        : sql`WITH chunks AS (INSERT INTO skein_transcript_chunks ${chunks})
          UPDATE skein_transcript_files SET size = ${size}, updated = ${now} WHERE cli_session_id = ${target.cliSessionId} AND path = ${file.path}`
    })
}

/** Replaces a whole file's rows with one row of `bytes`, and its size. */
export const replaceWhole = (store: Store, target: Target, file: SessionFiles.SessionFile, bytes: Buffer, isNew: boolean) =>
  store.sql.withTransaction(Effect.all([
    store.sql`DELETE FROM skein_transcript_chunks WHERE cli_session_id = ${target.cliSessionId} AND path = ${file.path}`,
    insertChunks(store, target.cliSessionId, file.path, [{ offset: 0, data: bytes }]),
    saveFile(store, target, file, bytes.length, isNew)
  ], { discard: true }))
