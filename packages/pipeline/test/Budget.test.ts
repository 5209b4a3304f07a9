import { describe, expect, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { Budget } from "../src/index.js"
import { keyed } from "../src/internal/item.js"

const progress = Effect.succeed({ done: 3, pending: 9 })

describe("Budget", () => {
  it.effect("admits while what is left covers the mean turn; check fails once a cap is crossed", () =>
    Effect.gen(function*() {
      const budget = yield* Budget.make({ usd: 1 })
      expect(yield* budget.admits).toBe(true)
      yield* budget.charge({ usd: 0.3, tokens: 10 })
      yield* budget.charge({ usd: 0.3, tokens: 10 })
      expect(yield* budget.admits).toBe(true) // 0.4 left, mean 0.3
      yield* budget.charge({ usd: 0.3, tokens: 10 })
      expect(yield* budget.admits).toBe(false) // 0.1 left, mean 0.3
      yield* budget.check(progress)
      yield* budget.charge({ usd: 0.3, tokens: 10 })
      const error = yield* Effect.flip(budget.check(progress))
      expect(error).toMatchObject({ _tag: "BudgetExceeded", reason: "crossed", done: 3, pending: 9, spent: { tokens: 40 } })
      expect(error.spent.usd).toBeCloseTo(1.2)
    }))

  it.effect("a token cap counts the same way", () =>
    Effect.gen(function*() {
      const budget = yield* Budget.make({ tokens: 100 })
      yield* budget.charge({ usd: 0, tokens: 60 })
      expect(yield* budget.admits).toBe(false)
      yield* budget.charge({ usd: 0, tokens: 60 })
      expect((yield* Effect.flip(budget.check(progress))).spent.tokens).toBe(120)
    }))

  it.effect("caps of 0, below 0 or NaN are BudgetInvalid", () =>
    Effect.gen(function*() {
      expect(yield* Effect.flip(Budget.make({ usd: 0 }))).toMatchObject({ _tag: "BudgetInvalid", field: "usd" })
      expect(yield* Effect.flip(Budget.make({ tokens: -1 }))).toMatchObject({ _tag: "BudgetInvalid", field: "tokens" })
      expect(yield* Effect.flip(Budget.make({ usd: Number.NaN }))).toMatchObject({ _tag: "BudgetInvalid", field: "usd" })
    }))
})

describe("item keys", () => {
  it.effect("a hash of the input with a counter for repeats; key order in objects does not matter", () =>
    Effect.gen(function*() {
      const items = yield* Stream.runCollect(keyed(Stream.make({ a: 1, b: 2 }, "x", { b: 2, a: 1 }, "y"), Effect.void))
      const keys = Array.from(items, (item) => item.key)
      expect(keys[0]!.endsWith("-0")).toBe(true)
      expect(keys[2]).toBe(keys[0]!.replace(/-0$/, "-1"))
      expect(new Set(keys).size).toBe(4)
      // A list that grew keeps the keys of the items it still holds.
      const grown = yield* Stream.runCollect(keyed(Stream.make("w", { a: 1, b: 2 }, "x"), Effect.void))
      expect(Array.from(grown, (item) => item.key)).toEqual([expect.any(String), keys[0], keys[1]])
    }))
})
