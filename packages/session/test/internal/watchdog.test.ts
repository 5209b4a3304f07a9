/**
 * The silence watchdog alone, on the TestClock.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option, Ref, TestClock } from "effect"
import * as Watchdog from "../../src/internal/watchdog.js"

const setup = Effect.gen(function*() {
  const waiting = yield* Ref.make(false)
  const lastSeenAt = yield* Ref.make(0)
  const fired = yield* Deferred.make<number>()
  const fiber = yield* Effect.fork(Watchdog.run({
    limit: "10 seconds",
    lastSeenAt: Ref.get(lastSeenAt),
    waiting: Ref.get(waiting),
    onSilent: (silent) => Deferred.succeed(fired, silent)
  }))
  return { waiting, lastSeenAt, fired, fiber }
})

describe("watchdog", () => {
  it.scoped("failure 8: silence while nobody waits on the CLI never counts", () =>
    Effect.gen(function*() {
      const { fired } = yield* setup
      yield* TestClock.adjust("10 minutes")
      expect(yield* Deferred.poll(fired)).toEqual(Option.none())
    }))

  it.scoped("silence counts from the start of a wait, not from the CLI's last word before it", () =>
    Effect.gen(function*() {
      const { fired, waiting } = yield* setup
      yield* TestClock.adjust("10 minutes")
      yield* Ref.set(waiting, true)
      yield* TestClock.adjust("5 seconds")
      expect(Option.isNone(yield* Deferred.poll(fired))).toBe(true)
      yield* TestClock.adjust("10 seconds")
      const silent = yield* Deferred.await(fired)
      expect(silent).toBeGreaterThan(10_000)
      expect(silent).toBeLessThanOrEqual(15_000)
    }))

  it.scoped("a CLI that keeps talking during a wait is not silent; the watchdog ends once it fired", () =>
    Effect.gen(function*() {
      const { fiber, fired, lastSeenAt, waiting } = yield* setup
      yield* Ref.set(waiting, true)
      for (let i = 0; i < 10; i++) {
        yield* TestClock.adjust("5 seconds")
        yield* Ref.set(lastSeenAt, (i + 1) * 5_000)
      }
      expect(Option.isNone(yield* Deferred.poll(fired))).toBe(true)
      yield* TestClock.adjust("20 seconds")
      yield* Deferred.await(fired)
      yield* Fiber.join(fiber)
    }))
})
