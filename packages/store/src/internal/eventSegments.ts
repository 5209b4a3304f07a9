/**
 * An event log's segment files, `<first seq, 16 digits>.jsonl`, one record a
 * line (see `eventRecord.ts`): naming, listing in seq order, and where the
 * seqs continue when a log is reopened.
 */
import type { PlatformError } from "@effect/platform/Error"
import type * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Option } from "effect"
import * as Path from "node:path"
import { type EventLogError, failAt } from "./eventLogError.js"
import { decodeRawRecord } from "./eventRecord.js"
import * as Jsonl from "./jsonlFile.js"

export interface Segment {
  readonly firstSeq: number
  readonly path: string
}

export const segmentName = (firstSeq: number): string => `${String(firstSeq).padStart(16, "0")}.jsonl`

export const segmentSeq = (name: string): number | undefined => {
  const match = /^(\d{16})\.jsonl$/.exec(name)
  return match === null ? undefined : Number(match[1])
}

export const isNotFound = (error: PlatformError): boolean => error._tag === "SystemError" && error.reason === "NotFound"

/** The segments in `dir`, oldest first; none when the folder is missing. Other files are ignored. */
export const listSegments = (fs: FileSystem.FileSystem, dir: string): Effect.Effect<ReadonlyArray<Segment>, EventLogError> =>
  fs.readDirectory(dir).pipe(
    Effect.catchIf(isNotFound, () => Effect.succeed<ReadonlyArray<string>>([])),
    Effect.map((names) =>
      names
        .flatMap((name): ReadonlyArray<Segment> => {
          const firstSeq = segmentSeq(name)
          return firstSeq === undefined ? [] : [{ firstSeq, path: Path.join(dir, name) }]
        })
        .sort((a, b) => a.firstSeq - b.firstSeq)
    ),
    Effect.mapError(failAt(dir))
  )

/** The seq of a segment's last record, reading backwards from its end. */
export const lastSeq = (fs: FileSystem.FileSystem, path: string): Effect.Effect<Option.Option<number>, PlatformError> =>
  Effect.scoped(Effect.gen(function*() {
    const file = yield* fs.open(path, { flag: "r" })
    let end = Number((yield* file.stat).size)
    while (end > 0) {
      const start = (yield* Jsonl.lastNewlineBefore(file, end - 1)) + 1
      const line = new TextDecoder().decode(yield* Jsonl.readAt(file, start, end - start))
      const record = decodeRawRecord(line.trimEnd())
      if (Option.isSome(record)) return Option.some(record.value.seq)
      end = start
    }
    return Option.none()
  }))

/** The seq after the newest segment's last record, once its torn last line (a crash mid-write) is cut. */
export const resumeSeq = (fs: FileSystem.FileSystem, last: Segment): Effect.Effect<number, EventLogError> =>
  Effect.gen(function*() {
    const repairs = yield* Jsonl.repairTail(fs, last.path)
    for (const repair of repairs) {
      yield* Effect.logWarning("EventLog: cut a torn tail").pipe(
        Effect.annotateLogs({ path: repair.path, offset: repair.offset, bytes: repair.bytes, reason: repair.reason })
      )
    }
    return yield* lastSeq(fs, last.path).pipe(
      Effect.map(Option.match({ onNone: () => last.firstSeq, onSome: (seq) => seq + 1 }))
    )
  }).pipe(Effect.mapError(failAt(last.path)))
