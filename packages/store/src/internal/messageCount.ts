/**
 * Counting the user and assistant lines of a transcript without parsing it:
 * a byte search for their `"type"` members, line by line. A listing calls it
 * on what a file grew by since the last count, so a long transcript is
 * scanned once, not at every listing.
 */
import type { PlatformError } from "@effect/platform/Error"
import type * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Stream } from "effect"

const markers = [Buffer.from("\"type\":\"user\""), Buffer.from("\"type\":\"assistant\"")]
const NEWLINE = 0x0a

export interface Counted {
  readonly count: number
  /** The end of the last complete line counted: where the next count resumes. */
  readonly offset: number
}

/** Counts the complete lines in `[from, end of file)` that hold a user or assistant marker. */
export const countMessages = (
  fs: FileSystem.FileSystem,
  path: string,
  from: number
): Effect.Effect<Counted, PlatformError> =>
  Effect.suspend(() => {
    let carry = Buffer.alloc(0)
    let count = 0
    let offset = from
    return fs.stream(path, { offset: from, chunkSize: 1024 * 1024 }).pipe(
      Stream.runForEach((chunk) =>
        Effect.sync(() => {
          const buf = carry.length === 0 ? Buffer.from(chunk) : Buffer.concat([carry, chunk])
          const last = buf.lastIndexOf(NEWLINE)
          if (last === -1) {
            carry = buf
            return
          }
          const next = markers.map(() => -1)
          let start = 0
          while (start <= last) {
            const end = buf.indexOf(NEWLINE, start)
            let hit = false
            for (let i = 0; i < markers.length; i++) {
              if (next[i]! !== Number.MAX_SAFE_INTEGER && next[i]! < start) {
                const at = buf.indexOf(markers[i]!, start)
                next[i] = at === -1 || at > last ? Number.MAX_SAFE_INTEGER : at
              }
              if (next[i]! < end) hit = true
            }
            if (hit) count++
            start = end + 1
          }
          offset += last + 1
          carry = buf.subarray(last + 1)
        })
      ),
      Effect.map(() => ({ count, offset }))
    )
  })
