/**
 * The CLI's transcript, mirrored into SQL as it is written, and restored
 * byte for byte on a machine that lacks it, so `--resume` works there.
 *
 * `sync` copies what the session's files gained since the last sync: JSONL
 * (the main chain, subagent sidechains) as rows of lines with their byte
 * offsets, in order, a torn or unfinished last line kept as it is; other
 * files (`session-memory/summary.md`, `.meta.json`) whole. It reads the
 * mirrored length from the database, so after a failed sync (the database
 * was down) the next one catches up from there. Before appending it checks
 * that the last mirrored row still matches the file; a file that shrank or
 * changed under the mirror is a `MirrorDiverged`, never overwritten.
 *
 * `restore` writes the files back under another config root (0600 files,
 * 0700 folders), appending to a file that holds an older prefix.
 *
 * @since 0.0.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import * as SessionFiles from "./internal/sessionFiles.js"
import { MirrorDiverged, reasonOf, StoreFailed, TranscriptNotMirrored } from "./SqlStoreError.js"
import { SqlStore } from "./SqlStore.js"

/**
 * @since 0.0.0
 */
export interface Target {
  /** The CLI's config root (`CLAUDE_CONFIG_DIR`) the session writes under. */
  readonly configDir: string
  readonly cliSessionId: string
  /** skein's `ses_` id, kept with the rows. */
  readonly sessionId?: string | undefined
}

/**
 * What a sync or restore did: bytes copied per relative path.
 *
 * @since 0.0.0
 */
export interface Report {
  readonly files: ReadonlyArray<{ readonly path: string; readonly bytes: number }>
}

/**
 * @since 0.0.0
 */
export class TranscriptMirror extends Context.Tag("@skein/sql/TranscriptMirror")<TranscriptMirror, {
  readonly sync: (target: Target) => Effect.Effect<Report, MirrorDiverged | StoreFailed>
  readonly restore: (cliSessionId: string, configDir: string) => Effect.Effect<Report, MirrorDiverged | StoreFailed | TranscriptNotMirrored>
}>() {}

const Int = Schema.Union(Schema.Number, Schema.NumberFromString)
const FileRows = Schema.Array(Schema.Struct({ path: Schema.String, kind: Schema.Literal("append", "whole"), size: Int, updated: Int }))
const ChunkRows = Schema.Array(Schema.Struct({ path: Schema.String, byte_offset: Int, data: Schema.Uint8ArrayFromSelf }))
const LastRows = Schema.Array(Schema.Struct({ byte_offset: Int, data: Schema.Uint8ArrayFromSelf }))

const rowsPerInsert = 500

interface Row {
  readonly offset: number
  readonly data: Buffer
}

/** A file's mirrored length, and its last row when this process knows it. */
interface Mirrored {
  readonly size: number
  readonly last: Row | undefined
}

/**
 * @since 0.0.0
 */
export const make = Effect.gen(function*() {
  const store = yield* SqlStore
  const sql = store.sql
  const failed = (operation: string) => (cause: unknown) =>
    cause instanceof MirrorDiverged ? cause : new StoreFailed({ operation, reason: reasonOf(cause) })
  // One sync of a session at a time in this process: two would read the same mirrored length.
  const lock = yield* Effect.makeSemaphore(1)
  /**
   * What this process last mirrored of each file (`<cli session>/<path>`):
   * its length and last row, so that a sync at a turn's end costs one round
   * trip (the write), not three. Dropped for a session whose sync failed:
   * the next one reads the database again and catches up from there.
   */
  const synced = new Map<string, Mirrored>()
  const keyOf = (cliSessionId: string, path: string) => `${cliSessionId}/${path}`
  const forget = (cliSessionId: string) =>
    Effect.sync(() => {
      for (const key of synced.keys()) if (key.startsWith(`${cliSessionId}/`)) synced.delete(key)
    })

  const insertChunks = (cliSessionId: string, path: string, rows: ReadonlyArray<{ readonly offset: number; readonly data: Buffer }>) =>
    Effect.forEach(
      Array.from({ length: Math.ceil(rows.length / rowsPerInsert) }, (_, i) => rows.slice(i * rowsPerInsert, (i + 1) * rowsPerInsert)),
      (slice) =>
        sql`INSERT INTO skein_transcript_chunks ${
          sql.insert(slice.map((row) => ({ cli_session_id: cliSessionId, path, byte_offset: row.offset, data: row.data })))
        }`,
      { discard: true }
    )

  const saveFile = (target: Target, file: SessionFiles.SessionFile, size: number, isNew: boolean) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      isNew
        ? sql`INSERT INTO skein_transcript_files ${
          sql.insert({ cli_session_id: target.cliSessionId, path: file.path, session_id: target.sessionId ?? null, kind: file.kind, size, updated: now })
        }`
        : sql`UPDATE skein_transcript_files SET size = ${size}, updated = ${now} WHERE cli_session_id = ${target.cliSessionId} AND path = ${file.path}`)

  /** The rows and the file's new size, in one statement on Postgres (a data-modifying CTE), else one transaction. */
  const writeAppend = (target: Target, file: SessionFiles.SessionFile, rows: ReadonlyArray<Row>, size: number, isNew: boolean) =>
    store.dialect !== "pg" || rows.length > rowsPerInsert
      ? sql.withTransaction(Effect.zipRight(insertChunks(target.cliSessionId, file.path, rows), saveFile(target, file, size, isNew)))
      : Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const chunks = sql.insert(rows.map((row) => ({ cli_session_id: target.cliSessionId, path: file.path, byte_offset: row.offset, data: row.data })))
        return isNew
          ? sql`WITH chunks AS (INSERT INTO skein_transcript_chunks ${chunks}) INSERT INTO skein_transcript_files ${
            sql.insert({ cli_session_id: target.cliSessionId, path: file.path, session_id: target.sessionId ?? null, kind: file.kind, size, updated: now })
          }`
          : sql`WITH chunks AS (INSERT INTO skein_transcript_chunks ${chunks})
            UPDATE skein_transcript_files SET size = ${size}, updated = ${now} WHERE cli_session_id = ${target.cliSessionId} AND path = ${file.path}`
      })

  /** The last mirrored row of a file: this process's own record of it, else the database's. */
  const lastRow = (target: Target, file: SessionFiles.SessionFile, mirrored: Mirrored) =>
    mirrored.last !== undefined ? Effect.succeed<Row | undefined>(mirrored.last) : Effect.map(
      Effect.flatMap(
        sql`SELECT byte_offset, data FROM skein_transcript_chunks
          WHERE cli_session_id = ${target.cliSessionId} AND path = ${file.path} ORDER BY byte_offset DESC LIMIT 1`,
        Schema.decodeUnknown(LastRows)
      ),
      (rows): Row | undefined => rows[0] === undefined ? undefined : { offset: rows[0].byte_offset, data: Buffer.from(rows[0].data) }
    )

  /** Appends what a JSONL file gained since the mirrored length; checks the last mirrored row first. */
  const syncAppend = (target: Target, file: SessionFiles.SessionFile, mirrored: Mirrored | undefined) =>
    Effect.gen(function*() {
      const full = Path.join(target.configDir, file.path)
      const size = (yield* SessionFiles.size(full)) ?? 0
      const from = mirrored?.size ?? 0
      const diverged = (offset: number, reason: string) =>
        new MirrorDiverged({ cliSessionId: target.cliSessionId, file: file.path, offset, reason })
      if (size < from) return yield* diverged(size, `the file has ${size} bytes, the mirror ${from}`)
      let last: Row | undefined = undefined
      if (mirrored !== undefined && from > 0) {
        last = yield* lastRow(target, file, mirrored)
        if (last !== undefined) {
          const onDisk = yield* SessionFiles.readRange(full, last.offset, last.offset + last.data.length)
          if (!onDisk.equals(last.data)) return yield* diverged(last.offset, "the last mirrored line differs from the file")
        }
      }
      if (size === from) {
        synced.set(keyOf(target.cliSessionId, file.path), { size, last })
        return 0
      }
      const bytes = yield* SessionFiles.readRange(full, from, size)
      const rows = SessionFiles.splitLines(bytes, from)
      yield* writeAppend(target, file, rows, from + bytes.length, mirrored === undefined)
      synced.set(keyOf(target.cliSessionId, file.path), { size: from + bytes.length, last: rows.at(-1) })
      return bytes.length
    })

  /** Replaces a whole file's copy when its content changed. */
  const syncWhole = (target: Target, file: SessionFiles.SessionFile, mirrored: number | undefined) =>
    Effect.gen(function*() {
      const full = Path.join(target.configDir, file.path)
      const size = yield* SessionFiles.size(full)
      if (size === undefined) return 0
      const bytes = yield* SessionFiles.readRange(full, 0, size)
      const cached = synced.get(keyOf(target.cliSessionId, file.path))
      if (cached?.last !== undefined && cached.last.data.equals(bytes)) return 0
      if (mirrored !== undefined) {
        const held = yield* Effect.flatMap(
          sql`SELECT byte_offset, data FROM skein_transcript_chunks WHERE cli_session_id = ${target.cliSessionId} AND path = ${file.path}`,
          Schema.decodeUnknown(LastRows)
        )
        if (held.length === 1 && Buffer.from(held[0]!.data).equals(bytes)) return 0
      }
      yield* sql.withTransaction(Effect.all([
        sql`DELETE FROM skein_transcript_chunks WHERE cli_session_id = ${target.cliSessionId} AND path = ${file.path}`,
        insertChunks(target.cliSessionId, file.path, [{ offset: 0, data: bytes }]),
        saveFile(target, file, bytes.length, mirrored === undefined)
      ], { discard: true }))
      synced.set(keyOf(target.cliSessionId, file.path), { size: bytes.length, last: { offset: 0, data: bytes } })
      return bytes.length
    })

  const sync = (target: Target) =>
    lock.withPermits(1)(Effect.gen(function*() {
      const files = yield* SessionFiles.list(target.configDir, target.cliSessionId)
      // Files this process mirrored need no look-up; a new one (or a first sync here) reads the rows.
      const known = files.every((file) => synced.has(keyOf(target.cliSessionId, file.path)))
      const mirrored = new Map<string, Mirrored>()
      if (known) {
        for (const file of files) mirrored.set(file.path, synced.get(keyOf(target.cliSessionId, file.path))!)
      } else {
        const rows = yield* Effect.flatMap(
          sql`SELECT path, kind, size, updated FROM skein_transcript_files WHERE cli_session_id = ${target.cliSessionId}`,
          Schema.decodeUnknown(FileRows)
        )
        for (const row of rows) {
          const cached = synced.get(keyOf(target.cliSessionId, row.path))
          mirrored.set(row.path, { size: row.size, last: cached?.size === row.size ? cached.last : undefined })
        }
      }
      const copied = yield* Effect.forEach(files, (file) =>
        Effect.map(
          file.kind === "append"
            ? syncAppend(target, file, mirrored.get(file.path))
            : syncWhole(target, file, mirrored.get(file.path)?.size),
          (bytes) => ({ path: file.path, bytes })
        ))
      return { files: copied.filter((f) => f.bytes > 0) }
    }).pipe(Effect.tapError(() => forget(target.cliSessionId)))).pipe(
      Effect.mapError(failed("mirror sync")),
      Effect.withSpan("TranscriptMirror.sync")
    )

  const restoreFile = (
    cliSessionId: string,
    configDir: string,
    file: { readonly path: string; readonly kind: SessionFiles.Kind; readonly updated: number }
  ) =>
    Effect.gen(function*() {
      const chunks = yield* Effect.flatMap(
        sql`SELECT path, byte_offset, data FROM skein_transcript_chunks
          WHERE cli_session_id = ${cliSessionId} AND path = ${file.path} ORDER BY byte_offset`,
        Schema.decodeUnknown(ChunkRows)
      )
      const content = Buffer.concat(chunks.map((c) => c.data))
      const gap = chunks.findIndex((c, i) => c.byte_offset !== chunks.slice(0, i).reduce((n, p) => n + p.data.length, 0))
      if (gap !== -1) {
        return yield* new MirrorDiverged({ cliSessionId, file: file.path, offset: chunks[gap]!.byte_offset, reason: "the mirror has a gap" })
      }
      const target = Path.join(configDir, ...file.path.split("/"))
      const onDisk = yield* Effect.promise(() => Fs.readFile(target).then((b): Buffer | undefined => b, () => undefined))
      if (onDisk !== undefined && onDisk.equals(content)) return 0
      // This disk is ahead of the mirror (a sync that failed, the database was down): the file wins, the next sync catches up.
      if (onDisk !== undefined && file.kind === "append" && onDisk.length > content.length && onDisk.subarray(0, content.length).equals(content)) {
        return 0
      }
      // A whole file (summary.md) rewritten here after the mirror's copy is kept.
      if (onDisk !== undefined && file.kind === "whole" && (yield* SessionFiles.mtime(target)) > file.updated) return 0
      const isPrefix = onDisk !== undefined && onDisk.length < content.length && content.subarray(0, onDisk.length).equals(onDisk)
      if (onDisk !== undefined && !isPrefix && file.kind === "append") {
        return yield* new MirrorDiverged({ cliSessionId, file: file.path, offset: 0, reason: "the file on disk is not a prefix of the mirror" })
      }
      yield* Effect.tryPromise(async () => {
        await Fs.mkdir(Path.dirname(target), { recursive: true, mode: 0o700 })
        if (isPrefix) await Fs.appendFile(target, content.subarray(onDisk.length), { mode: 0o600 })
        else await Fs.writeFile(target, content, { mode: 0o600 })
        await Fs.chmod(target, 0o600)
      })
      return content.length - (isPrefix ? onDisk.length : 0)
    })

  const restore = (cliSessionId: string, configDir: string) =>
    Effect.gen(function*() {
      const files = yield* Effect.flatMap(
        sql`SELECT path, kind, size, updated FROM skein_transcript_files WHERE cli_session_id = ${cliSessionId} ORDER BY path`,
        Schema.decodeUnknown(FileRows)
      )
      if (files.length === 0) return yield* new TranscriptNotMirrored({ cliSessionId })
      const written = yield* Effect.forEach(files, (file) =>
        Effect.map(restoreFile(cliSessionId, configDir, file), (bytes) => ({ path: file.path, bytes })))
      return { files: written }
    }).pipe(
      Effect.mapError((e) => e instanceof TranscriptNotMirrored ? e : failed("restore")(e)),
      Effect.withSpan("TranscriptMirror.restore")
    )

  return TranscriptMirror.of({ sync, restore })
})

/**
 * @since 0.0.0
 */
export const layer: Layer.Layer<TranscriptMirror, never, SqlStore> = Layer.effect(TranscriptMirror, make)
