/**
 * One line of a segment, `{"seq":…,"at":…,"message":…}`, with the message in
 * its encoded form. A line that does not decode (a torn write, a message the
 * schema no longer accepts) is skipped by readers, never an error.
 */
import { Effect, Option, Schema } from "effect"
import type { Record } from "../EventLog.js"
import { EventLogError } from "./eventLogError.js"

const RawRecord = Schema.Struct({ seq: Schema.Number, at: Schema.Number, message: Schema.Unknown })

/** One line as a record whose message is not decoded yet; none for a line that is not one. */
export const decodeRawRecord = Schema.decodeUnknownOption(Schema.parseJson(RawRecord))

/** One line as a record of `schema`; none for a line that is not one, or whose message does not decode. */
export const decodeRecord = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknownOption(schema)
  return (line: string): Option.Option<Record<A>> =>
    Option.flatMap(decodeRawRecord(line), (raw) =>
      Option.map(decode(raw.message), (message): Record<A> => ({ seq: raw.seq, at: raw.at, message })))
}

/** Records for `messages` with consecutive seqs from `firstSeq`, and their lines as one write. */
export const encodeBatch = <A, I>(schema: Schema.Schema<A, I>, dir: string) => {
  const encode = Schema.encode(schema)
  return (
    messages: ReadonlyArray<A>,
    firstSeq: number,
    at: number
  ): Effect.Effect<{ readonly records: ReadonlyArray<Record<A>>; readonly bytes: Uint8Array }, EventLogError> =>
    Effect.gen(function*() {
      const records: Array<Record<A>> = []
      let text = ""
      for (const [i, message] of messages.entries()) {
        const encoded = yield* encode(message).pipe(
          Effect.mapError((error) => new EventLogError({ path: dir, message: `cannot encode a message: ${error.message}` }))
        )
        const record = { seq: firstSeq + i, at, message }
        records.push(record)
        text += `${JSON.stringify({ seq: record.seq, at, message: encoded })}\n`
      }
      return { records, bytes: new TextEncoder().encode(text) }
    })
}
