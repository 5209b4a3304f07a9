/**
 * One line of a segment, `{"seq":…,"at":…,"message":…}`, with the message in
 * its encoded form. A line that does not decode (a torn write, a message the
 * schema no longer accepts) is skipped by readers, never an error.
 */
import { Lenient } from "@skein/protocol"
import { Effect, Option, Predicate, Schema, SchemaAST } from "effect"
import type { Record } from "../EventLog.js"
import { EventLogError } from "./eventLogError.js"

/**
 * A schema without transformations, whose encoded form is its type: such a
 * message is written as it is and checked by a guard when read, which skips
 * a rebuild of every message on the hot path (the server's envelope, whose
 * encode and decode cost 0.9 s of CPU per 30,000 streamed deltas).
 */
const isPlain = <A, I>(schema: Schema.Schema<A, I>): boolean =>
  SchemaAST.encodedAST(schema.ast) === schema.ast && SchemaAST.typeAST(schema.ast) === schema.ast

interface RawRecord {
  readonly seq: number
  readonly at: number
  readonly message: unknown
}

const isRawRecord = (u: unknown): u is RawRecord =>
  Predicate.hasProperty(u, "seq") && typeof u.seq === "number" &&
  Predicate.hasProperty(u, "at") && typeof u.at === "number" &&
  Predicate.hasProperty(u, "message")

/** One line as a record whose message is not decoded yet; none for a line that is not one. */
export const decodeRawRecord = (line: string): Option.Option<RawRecord> => {
  try {
    const json: unknown = JSON.parse(line)
    return isRawRecord(json) ? Option.some(json) : Option.none()
  } catch {
    return Option.none()
  }
}

/** One line as a record of `schema`; none for a line that is not one, or whose message does not decode. */
export const decodeRecord = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode: (u: unknown) => Option.Option<A> = isPlain(schema)
    ? ((is) => (u) => is(u) ? Option.some(u) : Option.none())(Lenient.check(schema).is)
    : Schema.decodeUnknownOption(schema)
  return (line: string): Option.Option<Record<A>> =>
    Option.flatMap(decodeRawRecord(line), (raw) =>
      Option.map(decode(raw.message), (message): Record<A> => ({ seq: raw.seq, at: raw.at, message })))
}

/** Appended records and their lines, as one write. */
export interface Batch<A> {
  readonly records: ReadonlyArray<Record<A>>
  readonly bytes: Uint8Array
}

/** Records for `messages` with consecutive seqs from `firstSeq`, and their lines as one write. */
export const encodeBatch = <A, I>(schema: Schema.Schema<A, I>, dir: string) => {
  const build = (messages: ReadonlyArray<A>, encoded: ReadonlyArray<unknown>, firstSeq: number, at: number): Batch<A> => {
    const records: Array<Record<A>> = []
    let text = ""
    for (let i = 0; i < messages.length; i++) {
      const seq = firstSeq + i
      records.push({ seq, at, message: messages[i]! })
      text += `${JSON.stringify({ seq, at, message: encoded[i] })}\n`
    }
    return { records, bytes: new TextEncoder().encode(text) }
  }
  // A plain message is its own encoded form: the batch is built with no effect per message.
  // A streamed delta is two messages (its canonical event and the legacy copy); without their
  // effects, one 100,000-delta run of bench/serve went from 13.2k to 15.9k deltas/s.
  if (isPlain(schema)) {
    return (messages: ReadonlyArray<A>, firstSeq: number, at: number): Effect.Effect<Batch<A>, EventLogError> =>
      Effect.sync(() => build(messages, messages, firstSeq, at))
  }
  const encodeAll = Schema.encode(Schema.Array(schema))
  return (messages: ReadonlyArray<A>, firstSeq: number, at: number): Effect.Effect<Batch<A>, EventLogError> =>
    encodeAll(messages).pipe(
      Effect.mapError((error) => new EventLogError({ path: dir, message: `cannot encode a message: ${error.message}` })),
      Effect.map((encoded) => build(messages, encoded, firstSeq, at))
    )
}
