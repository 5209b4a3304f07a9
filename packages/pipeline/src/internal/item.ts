/**
 * An item on its way through a pipeline: its value, its position in the
 * input, its key, and how many input items it stands for (one, or all of
 * them after a gather).
 */
import { Effect, Stream } from "effect"
import * as Crypto from "node:crypto"

export interface Item<A> {
  readonly index: number
  readonly key: string
  readonly value: A
  readonly sources: number
}

/** JSON with object keys sorted, so equal inputs hash alike whatever their key order. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0))
      : v) ?? "undefined"

/** A hash of an input: the first 16 hex digits of its canonical JSON's SHA-256. */
export const hashOf = (value: unknown): string =>
  Crypto.createHash("sha256").update(canonical(value)).digest("hex").slice(0, 16)

/**
 * Keys the inputs in order: the hash of each, with a counter for repeats
 * (`<hash>-0`, `<hash>-1`, …), so a list that grew or changed keeps the keys
 * of the items it still holds.
 */
export const keyed = <A, E, R>(inputs: Stream.Stream<A, E, R>, onRead: Effect.Effect<void>): Stream.Stream<Item<A>, E, R> =>
  Stream.suspend(() => {
    // Each run of the stream counts afresh.
    const seen = new Map<string, number>()
    return inputs.pipe(
      Stream.zipWithIndex,
      Stream.mapEffect(([value, index]) => {
        const hash = hashOf(value)
        const n = seen.get(hash) ?? 0
        seen.set(hash, n + 1)
        return Effect.as(onRead, { index, key: `${hash}-${n}`, value, sources: 1 })
      })
    )
  })
