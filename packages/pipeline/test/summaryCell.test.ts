/**
 * The run's summary cell: `get` reads the value; `changes` starts with the
 * value at subscription and then carries every update, none missed, none
 * twice; a subscriber that leaves is dropped.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Stream } from "effect"
import * as SummaryCell from "../src/internal/summaryCell.js"

describe("SummaryCell", () => {
  it.effect("get reads the value after each update", () =>
    Effect.gen(function*() {
      const cell = yield* SummaryCell.make({ n: 0 })
      yield* cell.update((s) => ({ n: s.n + 1 }))
      yield* cell.update((s) => ({ n: s.n * 10 }))
      expect(yield* cell.get).toEqual({ n: 10 })
    }))

  it.scoped("changes: the value at subscription, then every update in order", () =>
    Effect.gen(function*() {
      const cell = yield* SummaryCell.make(0)
      yield* cell.update((n) => n + 1)
      // A pull has subscribed once it returned its first chunk.
      const early = yield* Stream.toPull(cell.changes)
      const seenEarly = [...yield* early]
      yield* cell.update((n) => n + 1)
      const late = yield* Stream.toPull(cell.changes)
      const seenLate = [...yield* late]
      yield* cell.update((n) => n + 1)
      yield* cell.update((n) => n + 1)
      while (seenEarly.length < 4) seenEarly.push(...yield* early)
      while (seenLate.length < 3) seenLate.push(...yield* late)
      expect(seenEarly).toEqual([1, 2, 3, 4])
      expect(seenLate).toEqual([2, 3, 4])
    }))

  it.effect("a subscriber that ends no longer gets updates", () =>
    Effect.gen(function*() {
      const cell = yield* SummaryCell.make(0)
      expect(Chunk.toReadonlyArray(yield* Stream.runCollect(Stream.take(cell.changes, 1)))).toEqual([0])
      // Nothing holds the ended subscriber's mailbox: many updates later, a new one starts at the value.
      for (let i = 0; i < 100; i++) yield* cell.update((n) => n + 1)
      expect(Chunk.toReadonlyArray(yield* Stream.runCollect(Stream.take(cell.changes, 1)))).toEqual([100])
    }))
})
