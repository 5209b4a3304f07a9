/**
 * The newest records of an event log, kept in memory up to a byte budget.
 * A follower that fell a little behind its live buffer catches up from here
 * instead of reading and decoding the segment again: in a delta storm the
 * server's SSE feed refilled from disk at every pause of a client, and the
 * decode of those lines was a tenth of the server's CPU.
 */
import type { Record } from "../EventLog.js"

export class EventTail<A> {
  private records: Array<Record<A>> = []
  /** The encoded size of each record, for the budget. */
  private sizes: Array<number> = []
  /** Index of the oldest record still held (those before it are dropped, compacted away lazily). */
  private head = 0
  private bytes = 0

  constructor(readonly maxBytes: number) {}

  /** Records just appended, with consecutive seqs following those held, and their encoded size. */
  add(records: ReadonlyArray<Record<A>>, bytes: number): void {
    if (records.length === 0 || this.maxBytes <= 0) return
    const each = bytes / records.length
    for (const record of records) {
      this.records.push(record)
      this.sizes.push(each)
    }
    this.bytes += bytes
    while (this.bytes > this.maxBytes && this.head < this.records.length - 1) this.bytes -= this.sizes[this.head++]!
    if (this.head > 1024 && this.head * 2 > this.records.length) {
      this.records = this.records.slice(this.head)
      this.sizes = this.sizes.slice(this.head)
      this.head = 0
    }
  }

  /** Forgets the records before `seq` (retention deleted them from disk). */
  dropBefore(seq: number): void {
    while (this.head < this.records.length && this.records[this.head]!.seq < seq) this.bytes -= this.sizes[this.head++]!
  }

  /** The oldest seq held; undefined when nothing is. */
  first(): number | undefined {
    return this.head < this.records.length ? this.records[this.head]!.seq : undefined
  }

  /** The records held with `from <= seq < end`. */
  slice(from: number, end: number): Array<Record<A>> {
    const first = this.first()
    if (first === undefined) return []
    const start = this.head + Math.max(0, from - first)
    const stop = Math.min(this.records.length, this.head + Math.max(0, end - first))
    return start < stop ? this.records.slice(start, stop) : []
  }
}
