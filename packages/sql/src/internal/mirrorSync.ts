/**
 * One sync of a session's files into the mirror: what each JSONL file
 * gained since its mirrored length, appended after a check that the last
 * mirrored row still matches the file; each other file whole, when its
 * content changed.
 */
import * as Effect from "effect/Effect"
import * as Path from "node:path"
import { MirrorDiverged } from "../SqlStoreError.js"
import type { SqlStore } from "../SqlStore.js"
import type { Target } from "../TranscriptMirror.js"
import type { MirrorCache, Mirrored } from "./mirrorCache.js"
import * as MirrorRows from "./mirrorRows.js"
import * as SessionFiles from "./sessionFiles.js"

type Store = SqlStore["Type"]

/** The last mirrored row of a file: this process's own record of it, else the database's. */
const lastRow = (store: Store, target: Target, file: SessionFiles.SessionFile, mirrored: Mirrored) =>
  mirrored.last !== undefined
    ? Effect.succeed<MirrorRows.Row | undefined>(mirrored.last)
    : MirrorRows.lastRow(store, target.cliSessionId, file.path)

/** Appends what a JSONL file gained since the mirrored length; checks the last mirrored row first. */
const syncAppend = (store: Store, cache: MirrorCache, target: Target, file: SessionFiles.SessionFile, mirrored: Mirrored | undefined) =>
  Effect.gen(function*() {
    const full = Path.join(target.configDir, file.path)
    const size = (yield* SessionFiles.size(full)) ?? 0
    const from = mirrored?.size ?? 0
    const diverged = (offset: number, reason: string) =>
      new MirrorDiverged({ cliSessionId: target.cliSessionId, file: file.path, offset, reason })
    if (size < from) return yield* diverged(size, `the file has ${size} bytes, the mirror ${from}`)
    let last: MirrorRows.Row | undefined = undefined
    if (mirrored !== undefined && from > 0) {
      last = yield* lastRow(store, target, file, mirrored)
      if (last !== undefined) {
        const onDisk = yield* SessionFiles.readRange(full, last.offset, last.offset + last.data.length)
        if (!onDisk.equals(last.data)) return yield* diverged(last.offset, "the last mirrored line differs from the file")
      }
    }
    if (size === from) {
      cache.set(target.cliSessionId, file.path, { size, last })
      return 0
    }
    const bytes = yield* SessionFiles.readRange(full, from, size)
    const rows = SessionFiles.splitLines(bytes, from)
    yield* MirrorRows.writeAppend(store, target, file, rows, from + bytes.length, mirrored === undefined)
    cache.set(target.cliSessionId, file.path, { size: from + bytes.length, last: rows.at(-1) })
    return bytes.length
  })

/** Replaces a whole file's copy when its content changed. */
const syncWhole = (store: Store, cache: MirrorCache, target: Target, file: SessionFiles.SessionFile, mirrored: number | undefined) =>
  Effect.gen(function*() {
    const full = Path.join(target.configDir, file.path)
    const size = yield* SessionFiles.size(full)
    if (size === undefined) return 0
    const bytes = yield* SessionFiles.readRange(full, 0, size)
    const cached = cache.get(target.cliSessionId, file.path)
    if (cached?.last !== undefined && cached.last.data.equals(bytes)) return 0
    if (mirrored !== undefined) {
      const held = yield* MirrorRows.wholeRows(store, target.cliSessionId, file.path)
      if (held.length === 1 && Buffer.from(held[0]!.data).equals(bytes)) return 0
    }
    yield* MirrorRows.replaceWhole(store, target, file, bytes, mirrored === undefined)
    cache.set(target.cliSessionId, file.path, { size: bytes.length, last: { offset: 0, data: bytes } })
    return bytes.length
  })

/**
 * The mirrored state of each file: from this process's cache when it knows
 * every file (no look-up), else from the database, keeping a cached last
 * row whose size still matches.
 */
const mirroredOf = (store: Store, cache: MirrorCache, target: Target, files: ReadonlyArray<SessionFiles.SessionFile>) =>
  Effect.gen(function*() {
    const mirrored = new Map<string, Mirrored>()
    if (files.every((file) => cache.has(target.cliSessionId, file.path))) {
      for (const file of files) mirrored.set(file.path, cache.get(target.cliSessionId, file.path)!)
      return mirrored
    }
    for (const row of yield* MirrorRows.files(store, target.cliSessionId)) {
      const cached = cache.get(target.cliSessionId, row.path)
      mirrored.set(row.path, { size: row.size, last: cached?.size === row.size ? cached.last : undefined })
    }
    return mirrored
  })

/** Copies what the session's files gained; a failure forgets the session's cache. Run one at a time per process. */
export const sync = (store: Store, cache: MirrorCache, target: Target) =>
  Effect.gen(function*() {
    const files = yield* SessionFiles.list(target.configDir, target.cliSessionId)
    const mirrored = yield* mirroredOf(store, cache, target, files)
    const copied = yield* Effect.forEach(files, (file) =>
      Effect.map(
        file.kind === "append"
          ? syncAppend(store, cache, target, file, mirrored.get(file.path))
          : syncWhole(store, cache, target, file, mirrored.get(file.path)?.size),
        (bytes) => ({ path: file.path, bytes })
      ))
    return { files: copied.filter((f) => f.bytes > 0) }
  }).pipe(Effect.tapError(() => cache.forget(target.cliSessionId)))
