/**
 * JSON shapes shared by the wire schemas.
 *
 * These are guards declared directly rather than `Schema.Record` /
 * `Schema.Array`: validating them does not copy the value element by element,
 * which matters on the decode hot path (tool inputs, init's long name lists).
 */
import * as Schema from "effect/Schema"

export type JsonObject = { readonly [key: string]: unknown }

export const isJsonObject = (u: unknown): u is JsonObject =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/** Any JSON object; its members are not checked. */
export const JsonObject: Schema.Schema<JsonObject> = Schema.declare(isJsonObject, {
  identifier: "JsonObject",
  description: "a JSON object"
})

const isStringArray = (u: unknown): u is ReadonlyArray<string> => {
  if (!Array.isArray(u)) return false
  for (const x of u) if (typeof x !== "string") return false
  return true
}

/** An array of strings. */
export const StringArray: Schema.Schema<ReadonlyArray<string>> = Schema.declare(isStringArray, {
  identifier: "StringArray",
  description: "an array of strings"
})

/**
 * The `type` of an open union's catch-all member: any string outside the known
 * set. A value of a known type must then match that type's own schema, so a
 * malformed known value is reported instead of passing as "other".
 */
export const OtherTag = (known: ReadonlySet<string>, kind: string): Schema.filter<typeof Schema.String> =>
  Schema.String.pipe(
    Schema.filter((tag) => !known.has(tag), {
      message: () => `a ${kind} of a known type must match that type's schema`
    })
  )
