/**
 * The newest records of an SQL event log, as appended in this process or
 * carried by another's `NOTIFY`: a follower woken for them takes them from
 * here instead of reading the table.
 */
import type { EventLog } from "@skein/store"
import * as Schema from "effect/Schema"
import { Int } from "./eventRows.js"

/** A NOTIFY that carries its rows (a small append): the log, the first row's seq, their time and messages. */
const Notification = Schema.parseJson(Schema.Struct({ log: Schema.String, first: Int, at: Int, messages: Schema.Array(Schema.String) }))

/** A NOTIFY's payload as rows it carries; none for a bare log name or anything else. */
export const decodeNotification = Schema.decodeUnknownOption(Notification)

/** How many of the newest records a log keeps for its followers. */
const recentRecords = 256

/** Only a run from exactly a follower's cursor counts; anything else is read from the table. */
export const make = <A>() => {
  const bySeq = new Map<number, EventLog.Record<A>>()
  return {
    has: (seq: number) => bySeq.has(seq),
    add: (record: EventLog.Record<A>) => {
      bySeq.set(record.seq, record)
      // The oldest goes (records come about in seq order).
      if (bySeq.size > recentRecords) bySeq.delete(bySeq.keys().next().value!)
    },
    from: (cursor: number, max: number): ReadonlyArray<EventLog.Record<A>> | undefined => {
      const out: Array<EventLog.Record<A>> = []
      for (let record = bySeq.get(cursor); record !== undefined && out.length < max; record = bySeq.get(cursor + out.length)) out.push(record)
      return out.length === 0 ? undefined : out
    }
  }
}
