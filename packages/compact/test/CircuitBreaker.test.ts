import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, TestClock } from "effect"
import * as CircuitBreaker from "../src/CircuitBreaker.js"

const ok = { succeeded: (n: number) => n > 0 }

describe("CircuitBreaker", () => {
  it.effect("opens after 3 consecutive failures, skips automatic runs, and closes after a manual success", () =>
    Effect.gen(function*() {
      const breaker = yield* CircuitBreaker.make()
      const fail = Effect.fail("boom" as const)
      for (let i = 0; i < 2; i++) yield* Effect.exit(breaker.guard(fail, { automatic: true, ...ok }))
      expect(yield* breaker.state.get).toMatchObject({ consecutiveFailures: 2, open: false })
      // A declined pass counts as a failure too.
      yield* breaker.guard(Effect.succeed(0), { automatic: true, ...ok, describe: () => "declined: OverTarget" })
      expect(yield* breaker.state.get).toEqual({ consecutiveFailures: 3, open: true, lastFailure: "declined: OverTarget" })

      let ran = false
      const skipped = yield* Effect.exit(breaker.guard(Effect.sync(() => (ran = true, 1)), { automatic: true, ...ok }))
      expect(ran).toBe(false)
      expect(Exit.isFailure(skipped) && JSON.stringify(skipped.cause)).toContain("BreakerOpen")

      expect(yield* breaker.guard(Effect.succeed(1), { automatic: false, ...ok })).toBe(1)
      expect(yield* breaker.state.get).toEqual(CircuitBreaker.initial)
    }))

  it.effect("a success between failures resets the count; an interrupted run is not counted", () =>
    Effect.gen(function*() {
      const breaker = yield* CircuitBreaker.make({ threshold: 2 })
      yield* Effect.exit(breaker.guard(Effect.fail(1), { automatic: true, ...ok }))
      yield* breaker.guard(Effect.succeed(1), { automatic: true, ...ok })
      yield* Effect.exit(breaker.guard(Effect.fail(1), { automatic: true, ...ok }))
      expect(yield* breaker.state.get).toMatchObject({ consecutiveFailures: 1, open: false })
      const slow = yield* Effect.fork(breaker.guard(Effect.as(Effect.sleep("1 minute"), 1), { automatic: true, ...ok }))
      yield* TestClock.adjust("1 second")
      yield* Fiber.interrupt(slow)
      expect(yield* breaker.state.get).toMatchObject({ consecutiveFailures: 1, open: false })
    }))
})
