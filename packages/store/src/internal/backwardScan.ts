/**
 * Reading a JSONL file from its end in fixed-size blocks.
 *
 * Only lines that contain one of the given byte markers are handed out, so a
 * scan over megabytes of bookkeeping lines costs a `lastIndexOf` per block
 * and never decodes them. Memory is one block plus the longest line still
 * open across block borders; lines longer than `maxLineBytes` are skipped.
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import type { PlatformError } from "@effect/platform/Error"
import * as Effect from "effect/Effect"
import { readAt } from "./jsonlFile.js"

const NEWLINE = 0x0a

/** A complete line, without its newline, and the file offset where it starts. */
export interface Line {
  readonly offset: number
  readonly bytes: Uint8Array
}

export interface ScanOptions {
  /** Scan the bytes before this offset (exclusive). */
  readonly end: number
  readonly blockSize: number
  readonly markers: ReadonlyArray<Uint8Array>
  readonly maxLineBytes: number
  /** Stop after this many bytes were read; unbounded if omitted. */
  readonly limitBytes?: number | undefined
  /** Called with lines holding a marker, last line first; `true` stops the scan. */
  readonly onLine: (line: Line) => boolean
}

export interface ScanResult {
  readonly bytesRead: number
  readonly stopped: boolean
  /** Lines skipped for being longer than `maxLineBytes`. */
  readonly oversized: number
}

const asBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

const concat = (a: Uint8Array, b: Uint8Array): Uint8Array => {
  if (b.length === 0) return a
  const out = new Uint8Array(a.length + b.length)
  out.set(a, 0)
  out.set(b, a.length)
  return out
}

/**
 * Line starts (relative to `region`) of the lines in `region` that hold a
 * marker, last first. `region` holds complete lines only.
 */
export const markedLines = (
  region: Uint8Array,
  markers: ReadonlyArray<Uint8Array>
): ReadonlyArray<{ readonly start: number; readonly end: number }> => {
  const buffer = asBuffer(region)
  const found = new Map<number, number>()
  for (const marker of markers) {
    let at = buffer.lastIndexOf(marker)
    while (at >= 0) {
      const start = buffer.lastIndexOf(NEWLINE, at) + 1
      if (!found.has(start)) {
        const newline = buffer.indexOf(NEWLINE, at)
        found.set(start, newline === -1 ? buffer.length : newline)
      }
      if (start === 0) break
      at = buffer.lastIndexOf(marker, start - 1)
    }
  }
  return [...found.entries()].sort((a, b) => b[0] - a[0]).map(([start, end]) => ({ start, end }))
}

export const scanBackward = (file: FileSystem.File, options: ScanOptions): Effect.Effect<ScanResult, PlatformError> =>
  Effect.gen(function*() {
    let position = options.end
    // The beginning of a line whose end lies at `position` or later: bytes [position, position + carry.length).
    let carry: Uint8Array = new Uint8Array(0)
    // Inside a line longer than maxLineBytes: drop bytes until the newline before it.
    let skipping = false
    let bytesRead = 0
    let oversized = 0
    while (position > 0) {
      if (options.limitBytes !== undefined && bytesRead >= options.limitBytes) {
        return { bytesRead, stopped: false, oversized }
      }
      const start = Math.max(0, position - options.blockSize)
      const block = yield* readAt(file, start, position - start)
      bytesRead += block.length
      position = start
      let data: Uint8Array
      if (skipping) {
        const last = asBuffer(block).lastIndexOf(NEWLINE)
        if (last === -1 && start > 0) continue
        skipping = false
        // `last === -1` here means the skipped line starts the file.
        data = last === -1 ? new Uint8Array(0) : block.subarray(0, last)
      } else {
        data = concat(block, carry)
      }
      let regionStart = 0
      if (start > 0) {
        const first = asBuffer(data).indexOf(NEWLINE)
        if (first === -1) {
          carry = data
          if (carry.length > options.maxLineBytes) {
            carry = new Uint8Array(0)
            skipping = true
            oversized++
          }
          continue
        }
        regionStart = first + 1
        carry = data.slice(0, first)
      } else {
        carry = new Uint8Array(0)
      }
      const region = data.subarray(regionStart)
      for (const { end, start: lineStart } of markedLines(region, options.markers)) {
        if (end - lineStart > options.maxLineBytes) {
          oversized++
          continue
        }
        if (options.onLine({ offset: start + regionStart + lineStart, bytes: region.subarray(lineStart, end) })) {
          return { bytesRead, stopped: true, oversized }
        }
      }
    }
    return { bytesRead, stopped: false, oversized }
  })
