/**
 * Reading an event log from disk: the records of a seq range, streamed
 * segment by segment, never holding the history in memory.
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Ndjson from "@skein/protocol/Ndjson"
import { Effect, Option, Stream } from "effect"
import type { Record } from "../EventLog.js"
import { type EventLogError, failAt } from "./eventLogError.js"
import { isNotFound, listSegments } from "./eventSegments.js"

export interface EventReader<A> {
  /** Records with `from <= seq < end`, in seq order. */
  readonly range: (from: number, end: number) => Stream.Stream<Record<A>, EventLogError>
}

const seqPrefix = /^\{"seq":(\d+),/

/** The seq a line starts with (`NaN` if it does not: such a line is decoded, and rejected there). */
const seqOf = (line: string): number => Number(seqPrefix.exec(line)?.[1])

export const make = <A>(
  fs: FileSystem.FileSystem,
  dir: string,
  decodeLine: (line: string) => Option.Option<Record<A>>
): EventReader<A> => {
  const readSegment = (path: string, from: number): Stream.Stream<Record<A>, EventLogError> =>
    fs.stream(path, { chunkSize: 256 * 1024 }).pipe(
      // Retention may delete a segment while it is being read: its records are gone.
      Stream.catchAll((error) => isNotFound(error) ? Stream.empty : Stream.fail(failAt(path)(error))),
      Ndjson.frames(),
      // Lines before `from` are skipped by their seq prefix, without decoding the message.
      Stream.filterMap((frame) => frame._tag === "Line" && !(seqOf(frame.text) < from) ? decodeLine(frame.text) : Option.none())
    )

  const range = (from: number, end: number): Stream.Stream<Record<A>, EventLogError> =>
    Stream.unwrap(Effect.gen(function*() {
      const all = yield* listSegments(fs, dir)
      // The segment holding `from`, and every later one.
      const startAt = Math.max(0, all.findLastIndex((segment) => segment.firstSeq <= from))
      const wanted = all.slice(startAt).filter((segment) => segment.firstSeq < end)
      return Stream.fromIterable(wanted).pipe(
        Stream.flatMap((segment) => readSegment(segment.path, from), { concurrency: 1 }),
        Stream.filter((record) => record.seq >= from),
        Stream.takeWhile((record) => record.seq < end)
      )
    }))

  return { range }
}
