/**
 * Lenient decoding of NDJSON messages.
 *
 * The CLI gains message types between releases, so an unknown `type` (or an
 * unknown subtype of a known type) is data, kept whole as `Unknown`. A known
 * type whose fields do not fit its schema is a `Malformed` diagnostic, never a
 * silent `Unknown`. Bad bytes never fail the stream: every input line comes
 * out as exactly one message or one diagnostic.
 *
 * Wire schemas have no transformations (their encoded and decoded forms are
 * the same), so a message is validated rather than rebuilt: the decoded value
 * is the parsed JSON object itself, excess fields included, and encoding it is
 * `JSON.stringify`.
 */
import { dual } from "effect/Function"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import type * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { isJsonObject, type JsonObject } from "./Json.js"
import { guardOf } from "./internal/guard.js"
import * as Ndjson from "./Ndjson.js"

export type { JsonObject }

/** A message whose type (and subtype) this decoder knows, checked against its schema. */
export interface Message<A> {
  readonly _tag: "Message"
  readonly line: number
  readonly message: A
}

/** A JSON object of a type or subtype this decoder does not know, kept as it came. */
export interface Unknown {
  readonly _tag: "Unknown"
  readonly line: number
  readonly type: string | undefined
  readonly subtype: string | undefined
  readonly json: JsonObject
}

/** A known type whose fields do not fit its schema. */
export interface Malformed {
  readonly _tag: "Malformed"
  readonly line: number
  readonly type: string
  readonly subtype: string | undefined
  readonly raw: string
  readonly issue: string
}

/** A line that is not a JSON object. */
export interface Unparseable {
  readonly _tag: "Unparseable"
  readonly line: number
  readonly raw: string
  readonly error: string
}

export type Diagnostic = Malformed | Unparseable | Ndjson.Oversized

export type Decoded<A> = Message<A> | Unknown | Diagnostic

export const isDiagnostic = <A>(decoded: Decoded<A>): decoded is Diagnostic =>
  decoded._tag === "Malformed" || decoded._tag === "Unparseable" || decoded._tag === "Oversized"

/** How one known `type` is checked: by one schema, or by a subtype read from the object. */
export type Variant<A> =
  | { readonly _tag: "Schema"; readonly check: Check<A> }
  | {
    readonly _tag: "Subtypes"
    readonly subtypeOf: (json: JsonObject) => unknown
    readonly subtypes: { readonly [subtype: string]: Check<A> }
  }

export interface Check<A> {
  readonly is: (u: unknown) => u is A
  readonly explain: (u: unknown) => string
}

/**
 * A schema with no requirements. Wire schemas must also have no
 * transformations: a value that passes `is` is returned as it was parsed.
 */
export type WireSchema<A, I = A> = Schema.Schema<A, I, never>

export const check = <A, I>(schema: WireSchema<A, I>): Check<A> => {
  const guard = guardOf(schema.ast)
  const is = (u: unknown): u is A => guard(u)
  const decode = ParseResult.decodeUnknownEither(schema, { errors: "all", onExcessProperty: "preserve" })
  return {
    is: (u): u is A => is(u),
    explain: (u) => {
      const result = decode(u)
      if (result._tag === "Right") return "valid"
      return ParseResult.ArrayFormatter.formatIssueSync(result.left)
        .map((issue) => issue.path.length > 0 ? `${issue.path.join(".")}: ${issue.message}` : issue.message)
        .join("; ")
    }
  }
}

export const schema = <A, I>(s: WireSchema<A, I>): Variant<A> => ({ _tag: "Schema", check: check(s) })

/** Dispatch on a subtype; by default the object's own `subtype` field. */
export const subtypes = <const Table extends { readonly [subtype: string]: Schema.Schema.AnyNoContext }>(
  table: Table,
  subtypeOf: (json: JsonObject) => unknown = (json) => json["subtype"]
): Variant<Schema.Schema.Type<Table[keyof Table]>> => {
  const checks: { [subtype: string]: Check<Schema.Schema.Type<Table[keyof Table]>> } = Object.create(null)
  for (const [key, s] of Object.entries(table)) checks[key] = check(s)
  return { _tag: "Subtypes", subtypeOf, subtypes: checks }
}

export interface Decoder<A> {
  readonly variants: { readonly [type: string]: Variant<A> }
  /** Decode one line of text; never throws. */
  readonly decodeLine: (text: string, line: number) => Decoded<A>
  /** Decode an already-parsed JSON value; never throws. */
  readonly decodeJson: (json: unknown, line: number, raw?: string) => Decoded<A>
}


export const make = <A>(variants: { readonly [type: string]: Variant<A> }): Decoder<A> => {
  const table: { [type: string]: Variant<A> } = Object.create(null)
  Object.assign(table, variants)
  const decodeJson = (json: unknown, line: number, raw?: string): Decoded<A> => {
    if (!isJsonObject(json)) {
      return { _tag: "Unparseable", line, raw: raw ?? JSON.stringify(json), error: "expected a JSON object" }
    }
    const type = json["type"]
    const variant = typeof type === "string" ? table[type] : undefined
    if (typeof type !== "string" || variant === undefined) {
      const subtype = json["subtype"]
      return {
        _tag: "Unknown",
        line,
        type: typeof type === "string" ? type : undefined,
        subtype: typeof subtype === "string" ? subtype : undefined,
        json
      }
    }
    const knownType = type
    let check: Check<A> | undefined
    let subtype: string | undefined
    if (variant._tag === "Schema") {
      check = variant.check
    } else {
      const sub = variant.subtypeOf(json)
      subtype = typeof sub === "string" ? sub : undefined
      check = subtype === undefined ? undefined : variant.subtypes[subtype]
      if (check === undefined) {
        if (sub !== undefined && typeof sub !== "string") {
          return malformed(line, knownType, undefined, raw, json, "subtype: expected a string")
        }
        return { _tag: "Unknown", line, type: knownType, subtype, json }
      }
    }
    if (check.is(json)) return { _tag: "Message", line, message: json }
    return malformed(line, knownType, subtype, raw, json, check.explain(json))
  }
  return {
    variants: table,
    decodeJson,
    decodeLine: (text, line) => {
      let json: unknown
      try {
        json = JSON.parse(text)
      } catch (e) {
        return { _tag: "Unparseable", line, raw: text, error: e instanceof Error ? e.message : String(e) }
      }
      return decodeJson(json, line, text)
    }
  }
}

const malformed = (
  line: number,
  type: string,
  subtype: string | undefined,
  raw: string | undefined,
  json: JsonObject,
  issue: string
): Malformed => ({ _tag: "Malformed", line, type, subtype, raw: raw ?? JSON.stringify(json), issue })

/** Decode one frame from `Ndjson.frames`. */
export const decodeFrame = <A>(decoder: Decoder<A>, frame: Ndjson.Frame): Decoded<A> =>
  frame._tag === "Line" ? decoder.decodeLine(frame.text, frame.line) : frame

/** Frame and decode a byte stream. Fails only if the input stream fails. */
export const decodeStream: {
  <A>(decoder: Decoder<A>, options?: Ndjson.FrameOptions): <E, R>(self: Stream.Stream<Uint8Array, E, R>) => Stream.Stream<Decoded<A>, E, R>
  <A, E, R>(self: Stream.Stream<Uint8Array, E, R>, decoder: Decoder<A>, options?: Ndjson.FrameOptions): Stream.Stream<Decoded<A>, E, R>
} = dual(
  (args) => Predicate.hasProperty(args[0], Stream.StreamTypeId),
  <A, E, R>(self: Stream.Stream<Uint8Array, E, R>, decoder: Decoder<A>, options?: Ndjson.FrameOptions) =>
    Ndjson.mapFrames(self, (frame) => decodeFrame(decoder, frame), options)
)

/** Decode a whole buffer, for files already in memory. */
export const decodeAll = <A>(decoder: Decoder<A>, bytes: Uint8Array, options?: Ndjson.FrameOptions): ReadonlyArray<Decoded<A>> =>
  Ndjson.framesOf(bytes, options).map((frame) => decodeFrame(decoder, frame))

/**
 * A decoder a reader feeds bytes to itself, for a loop that pulls from a
 * pipe instead of running a stream over it (a stream's executors cost more
 * than the loop for a reader that lives as long as its session).
 */
export type Incremental<A> = Ndjson.Incremental<Decoded<A>>

export const incremental = <A>(decoder: Decoder<A>, options?: Ndjson.FrameOptions): Incremental<A> =>
  Ndjson.incremental((frame) => decodeFrame(decoder, frame), options)
