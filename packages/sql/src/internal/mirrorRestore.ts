/**
 * Writing a mirrored session's files back under a config root: 0600 files
 * in 0700 folders, appending to a file that holds an older prefix, and
 * leaving a file that is ahead of the mirror (or a whole file rewritten
 * since) as it is.
 */
import * as Effect from "effect/Effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { MirrorDiverged, TranscriptNotMirrored } from "../SqlStoreError.js"
import type { SqlStore } from "../SqlStore.js"
import * as MirrorRows from "./mirrorRows.js"
import * as SessionFiles from "./sessionFiles.js"

type Store = SqlStore["Type"]

interface FileRecord {
  readonly path: string
  readonly kind: SessionFiles.Kind
  readonly updated: number
}

/** A file's mirrored content, checked for gaps between its rows. */
const content = (store: Store, cliSessionId: string, path: string) =>
  Effect.gen(function*() {
    const chunks = yield* MirrorRows.chunks(store, cliSessionId, path)
    const gap = chunks.findIndex((c, i) => c.byte_offset !== chunks.slice(0, i).reduce((n, p) => n + p.data.length, 0))
    if (gap !== -1) {
      return yield* new MirrorDiverged({ cliSessionId, file: path, offset: chunks[gap]!.byte_offset, reason: "the mirror has a gap" })
    }
    return Buffer.concat(chunks.map((c) => c.data))
  })

/** Writes `content` at `target`, or only its part past `prefix` bytes already there. */
const write = (target: string, content: Buffer, prefix: number | undefined) =>
  Effect.tryPromise(async () => {
    await Fs.mkdir(Path.dirname(target), { recursive: true, mode: 0o700 })
    if (prefix !== undefined) await Fs.appendFile(target, content.subarray(prefix), { mode: 0o600 })
    else await Fs.writeFile(target, content, { mode: 0o600 })
    await Fs.chmod(target, 0o600)
  })

/** Restores one file; the bytes written. */
const restoreFile = (store: Store, cliSessionId: string, configDir: string, file: FileRecord) =>
  Effect.gen(function*() {
    const mirrored = yield* content(store, cliSessionId, file.path)
    const target = Path.join(configDir, ...file.path.split("/"))
    const onDisk = yield* Effect.promise(() => Fs.readFile(target).then((b): Buffer | undefined => b, () => undefined))
    if (onDisk !== undefined && onDisk.equals(mirrored)) return 0
    // This disk is ahead of the mirror (a sync that failed, the database was down): the file wins, the next sync catches up.
    if (onDisk !== undefined && file.kind === "append" && onDisk.length > mirrored.length && onDisk.subarray(0, mirrored.length).equals(mirrored)) {
      return 0
    }
    // A whole file (summary.md) rewritten here after the mirror's copy is kept.
    if (onDisk !== undefined && file.kind === "whole" && (yield* SessionFiles.mtime(target)) > file.updated) return 0
    const isPrefix = onDisk !== undefined && onDisk.length < mirrored.length && mirrored.subarray(0, onDisk.length).equals(onDisk)
    if (onDisk !== undefined && !isPrefix && file.kind === "append") {
      return yield* new MirrorDiverged({ cliSessionId, file: file.path, offset: 0, reason: "the file on disk is not a prefix of the mirror" })
    }
    yield* write(target, mirrored, isPrefix ? onDisk.length : undefined)
    return mirrored.length - (isPrefix ? onDisk.length : 0)
  })

/** Restores every mirrored file of the session; `TranscriptNotMirrored` when the mirror has none. */
export const restore = (store: Store, cliSessionId: string, configDir: string) =>
  Effect.gen(function*() {
    const files = yield* MirrorRows.files(store, cliSessionId)
    if (files.length === 0) return yield* new TranscriptNotMirrored({ cliSessionId })
    const written = yield* Effect.forEach(files, (file) =>
      Effect.map(restoreFile(store, cliSessionId, configDir, file), (bytes) => ({ path: file.path, bytes })))
    return { files: written }
  })
