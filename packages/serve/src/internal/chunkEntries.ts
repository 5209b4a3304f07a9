/**
 * One chunk of the log as one SSE client's entries: the records it gets as
 * items (runs of one part's deltas as one item, shared by every client), the
 * rest as skips, and after each entry how many live events the client has
 * then received (its lag counts only those).
 */
import type * as Chunk from "effect/Chunk"
import type { Record } from "../ServerEvents.js"
import type * as PendingFrames from "./pendingFrames.js"
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
    readonly runs: ReadonlyArray<PendingFrames.Group>
  }) | undefined
}

export interface Entries {
  readonly entries: Array<SubscriberBuffer.Entry>
  /** After each entry: what `received` becomes once it is in. */
  readonly marks: Array<number>
  /**
   * Items whose events interleave with another's (a delta and its legacy
   * copy): their seqs are not in order, so the chunk must go in whole or
   * record by record (a buffer that took part of it could not resume at one seq).
   */
  readonly interleaved: boolean
}

/** What `entriesOf` builds as it goes: one object per call, no closure per client per chunk. */
interface Building {
  readonly entries: Array<SubscriberBuffer.Entry>
  readonly marks: Array<number>
  readonly handed: number
  counted: number
  through: number
}

/** One record on its own: a skip, or its item (counted once if live). */
const one = (b: Building, shape: Shape, record: Record) => {
  // The shared feed may hand over a chunk that starts before what this client holds.
  if (record.seq <= b.handed) return
  if (!shape.gets(record)) {
    b.entries.push({ _tag: "Skip", seq: record.seq })
    b.marks.push(b.counted)
    return
  }
  // Only live events count (replay reads the disk at the client's pace), each once.
  if (record.seq > b.through) {
    b.through = record.seq
    b.counted++
  }
  b.entries.push(shape.itemOf(record))
  b.marks.push(b.counted)
}

export const entriesOf = (chunk: Chunk.Chunk<Record>, cursor: Cursor, shape: Shape): Entries => {
  const b: Building = { entries: [], marks: [], handed: cursor.handed, counted: cursor.received, through: cursor.countedThrough }
  const { entries, marks, handed } = b
  if (shape.runsOf === undefined) {
    for (const record of chunk) one(b, shape, record)
    return { entries, marks, interleaved: false }
  }
  const { records, runs } = shape.runsOf(chunk)
  // The skips of interleaved items go last: a skip moves the cursor over every seq below it.
  const skips: Array<number> = []
  let interleaved = false
  for (const run of runs) {
    const first = records[run.start]!.seq
    const last = records[run.end - 1]!.seq
    if (last <= handed) continue
    // A lone record, a stretch this client holds part of, or counted in part: record by record.
    if (run.end - run.start === 1 || first <= handed || first <= b.through) {
      for (let i = run.start; i < run.end; i++) one(b, shape, records[i]!)
      continue
    }
    const mixed = run.joined.length > 1
    let taken = 0
    for (const { at, count, item } of run.joined) {
      // One session's records of one key: this client gets all of them or none.
      if (!shape.gets(records[at]!)) {
        if (mixed) skips.push(item.seq)
        else {
          entries.push({ _tag: "Skip", seq: item.seq })
          marks.push(b.counted)
        }
        continue
      }
      // Two of a stretch's keys for this client: their seqs interleave.
      interleaved ||= ++taken > 1
      b.counted += count
      entries.push(item)
      marks.push(b.counted)
    }
    b.through = last
  }
  for (const seq of skips) {
    entries.push({ _tag: "Skip", seq })
    marks.push(b.counted)
  }
  return { entries, marks, interleaved }
}
