/**
 * Byte-level helpers for append-only JSONL files: positional reads, finding
 * line ends from the back, and cutting a torn last line.
 */
import type { PlatformError } from "@effect/platform/Error"
import type * as FileSystem from "@effect/platform/FileSystem"
import { Effect } from "effect"

export const NEWLINE = 0x0a

/** Reads up to `length` bytes at `offset` (fewer only at end of file). */
export const readAt = (file: FileSystem.File, offset: number, length: number): Effect.Effect<Uint8Array, PlatformError> =>
  Effect.gen(function*() {
    const buffer = new Uint8Array(length)
    yield* file.seek(offset, "start")
    let filled = 0
    while (filled < length) {
      const n = Number(yield* file.read(buffer.subarray(filled)))
      if (n === 0) break
      filled += n
    }
    return filled === length ? buffer : buffer.subarray(0, filled)
  })

/** The offset of the last newline before `end` (exclusive), or -1. Reads backwards in blocks. */
export const lastNewlineBefore = (
  file: FileSystem.File,
  end: number,
  blockSize = 64 * 1024
): Effect.Effect<number, PlatformError> =>
  Effect.gen(function*() {
    let to = end
    while (to > 0) {
      const from = Math.max(0, to - blockSize)
      const block = yield* readAt(file, from, to - from)
      const at = block.lastIndexOf(NEWLINE)
      if (at !== -1) return from + at
      to = from
    }
    return -1
  })

/** Whether a line is one JSON object (what every JSONL writer here appends). */
export const isJsonObjectLine = (bytes: Uint8Array): boolean => {
  try {
    const value: unknown = JSON.parse(new TextDecoder().decode(bytes))
    return typeof value === "object" && value !== null && !Array.isArray(value)
  } catch {
    return false
  }
}

/** A torn or broken tail cut away when a file is opened for appending. */
export interface TornTail {
  readonly _tag: "TornTail"
  readonly path: string
  /** Where the removed bytes started; the file now ends here. */
  readonly offset: number
  readonly bytes: number
  readonly reason: "NoNewline" | "InvalidJson"
  /** The first bytes of what was removed, for logs. */
  readonly preview: string
}

const preview = (bytes: Uint8Array) => new TextDecoder().decode(bytes.subarray(0, 120))

/**
 * Cuts a last line that has no newline (a write torn by a crash), then a last
 * complete line that is not a JSON object, and returns what it removed.
 * Everything before stays as it is: the file is append-only.
 */
export const repairTail = (
  fs: FileSystem.FileSystem,
  path: string
): Effect.Effect<ReadonlyArray<TornTail>, PlatformError> =>
  Effect.scoped(Effect.gen(function*() {
    const file = yield* fs.open(path, { flag: "r+" })
    const size = Number((yield* file.stat).size)
    if (size === 0) return []
    const repairs: Array<TornTail> = []
    let end = size
    const last = yield* readAt(file, end - 1, 1)
    if (last[0] !== NEWLINE) {
      const newline = yield* lastNewlineBefore(file, end)
      const cut = newline + 1
      const removed = yield* readAt(file, cut, Math.min(end - cut, 4096))
      repairs.push({ _tag: "TornTail", path, offset: cut, bytes: end - cut, reason: "NoNewline", preview: preview(removed) })
      end = cut
    }
    if (end > 0) {
      const start = (yield* lastNewlineBefore(file, end - 1)) + 1
      const line = yield* readAt(file, start, end - 1 - start)
      if (!isJsonObjectLine(line)) {
        repairs.push({
          _tag: "TornTail",
          path,
          offset: start,
          bytes: end - start,
          reason: "InvalidJson",
          preview: preview(line)
        })
        end = start
      }
    }
    if (end !== size) {
      yield* file.truncate(end)
      yield* file.sync
    }
    return repairs
  }))
