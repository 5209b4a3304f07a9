import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Fiber, Stream } from "effect"
import * as StateCell from "../../src/internal/stateCell.js"

describe("StateCell", () => {
  it.scoped("get and changes: the current value first, then every update in order", () =>
    Effect.gen(function*() {
      const cell = yield* StateCell.make(0)
      yield* cell.update((n) => n + 1)
      expect(yield* cell.get).toBe(1)
      // The first pull subscribes and reads the value then current.
      const pull = yield* Stream.toPull(cell.changes)
      expect(Chunk.toReadonlyArray(yield* pull)).toEqual([1])
      for (let i = 0; i < 3; i++) yield* cell.update((n) => n + 10)
      const rest: Array<number> = []
      while (rest.length < 3) rest.push(...Chunk.toReadonlyArray(yield* pull))
      expect(rest).toEqual([11, 21, 31])
      expect(cell.unsafeGet()).toBe(31)
    }))

  it.effect("a subscriber that starts between updates never sees a value older than one it saw", () =>
    Effect.gen(function*() {
      const cell = yield* StateCell.make(0)
      const updates = Effect.forEach(Array.from({ length: 100 }, (_, i) => i), () =>
        Effect.zipRight(cell.update((n) => n + 1), Effect.yieldNow()), { discard: true })
      const writer = yield* Effect.fork(updates)
      const readers = yield* Effect.forEach(Array.from({ length: 20 }, (_, i) => i), (i) =>
        Effect.fork(Effect.zipRight(
          Effect.repeatN(Effect.yieldNow(), i * 3),
          cell.changes.pipe(Stream.takeUntil((n) => n === 100), Stream.runCollect)
        )))
      yield* Fiber.join(writer)
      for (const reader of readers) {
        const values = Chunk.toReadonlyArray(yield* Fiber.join(reader))
        expect(values.at(-1)).toBe(100)
        // Strictly increasing: no repeat, no step back.
        for (let i = 1; i < values.length; i++) expect(values[i]!).toBeGreaterThan(values[i - 1]!)
      }
    }))
})
