/**
 * One chunk of the log as one SSE client's entries: the records it gets as
 * items (runs of one part's deltas as one item, shared by every client), the
 * rest as skips, and after each entry how many live events the client has
 * then received (its lag counts only those).
 */
import type * as Chunk from "effect/Chunk"
import type { Record } from "../ServerEvents.js"
import type * as SubscriberBuffer from "./subscriberBuffer.js"

export interface Cursor {
  /** The newest seq offered or skipped: records up to it are not handed again. */
  readonly handed: number
  /** Live events received so far. */
  readonly received: number
  /** The newest seq counted in `received`. */
  readonly countedThrough: number
}

export interface Shape {
  /** Whether the client gets the record (its directory, its event version). */
  readonly gets: (record: Record) => boolean
  /** The record's item, shared by every client of the format. */
  readonly itemOf: (record: Record) => SubscriberBuffer.Item
  /** The chunk's runs, shared by every client of the format; `undefined`: record by record. */
  readonly runsOf: ((chunk: Chunk.Chunk<Record>) => {
    readonly records: ReadonlyArray<Record>
    readonly runs: ReadonlyArray<{ readonly item: SubscriberBuffer.Item; readonly start: number; readonly end: number }>
  }) | undefined
}

export interface Entries {
  readonly entries: Array<SubscriberBuffer.Entry>
  /** After each entry: what `received` becomes once it is in. */
  readonly marks: Array<number>
}

export const entriesOf = (chunk: Chunk.Chunk<Record>, cursor: Cursor, shape: Shape): Entries => {
  const entries: Array<SubscriberBuffer.Entry> = []
  const marks: Array<number> = []
  const { handed } = cursor
  let counted = cursor.received
  let through = cursor.countedThrough
  const one = (record: Record) => {
    // The shared feed may hand over a chunk that starts before what this client holds.
    if (record.seq <= handed) return
    if (!shape.gets(record)) {
      entries.push({ _tag: "Skip", seq: record.seq })
      marks.push(counted)
      return
    }
    // Only live events count (replay reads the disk at the client's pace), each once.
    if (record.seq > through) {
      through = record.seq
      counted++
    }
    entries.push(shape.itemOf(record))
    marks.push(counted)
  }
  if (shape.runsOf === undefined) {
    for (const record of chunk) one(record)
    return { entries, marks }
  }
  const { records, runs } = shape.runsOf(chunk)
  for (const run of runs) {
    const first = records[run.start]!.seq
    const last = records[run.end - 1]!.seq
    if (last <= handed) continue
    // A lone record, or a run this client holds part of: record by record.
    if (run.end - run.start === 1 || first <= handed) {
      for (let i = run.start; i < run.end; i++) one(records[i]!)
      continue
    }
    // One session's records of one type: this client gets all of them or none.
    if (!shape.gets(records[run.start]!)) {
      entries.push({ _tag: "Skip", seq: last })
      marks.push(counted)
      continue
    }
    if (last > through) {
      counted += last - Math.max(through, first - 1)
      through = last
    }
    entries.push(run.item)
    marks.push(counted)
  }
  return { entries, marks }
}
