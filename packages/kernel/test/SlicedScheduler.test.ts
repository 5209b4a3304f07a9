/**
 * The sliced scheduler: Effect's task order, a turn for the event loop once a
 * slice is spent, and whole programs of many fibers under it. The clock is a
 * counter the tasks advance, so no figure here depends on the machine.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, FiberRef, Scheduler } from "effect"
import { SlicedScheduler } from "../src/index.js"

/** A clock that moves only when a task says it spent time. */
const counterClock = () => {
  let now = 0
  return { now: () => now, spend: (millis: number) => void (now += millis) }
}

const nextLoopTurn = () => new Promise<void>((resolve) => setImmediate(resolve))

describe("SlicedScheduler", () => {
  it("runs tasks by priority, and first in, first out within one", async () => {
    const scheduler = SlicedScheduler.make()
    const log: Array<string> = []
    scheduler.scheduleTask(() => log.push("a0"), 0)
    scheduler.scheduleTask(() => log.push("b1"), 1)
    scheduler.scheduleTask(() => log.push("c0"), 0)
    scheduler.scheduleTask(() => {
      log.push("d0")
      // Scheduled while draining: runs in the same slice, after what was ready.
      scheduler.scheduleTask(() => log.push("e0"), 0)
    }, 0)
    await nextLoopTurn()
    await nextLoopTurn()
    expect(log).toEqual(["a0", "c0", "d0", "b1", "e0"])
  })

  it("gives the event loop a turn once a slice is spent, then goes on where it stopped", async () => {
    const clock = counterClock()
    const scheduler = SlicedScheduler.make({ sliceMillis: 3, now: clock.now })
    const log: Array<string> = []
    for (let i = 0; i < 8; i++) {
      scheduler.scheduleTask(() => {
        log.push(`t${i}`)
        clock.spend(1)
      }, 0)
    }
    // Queued behind the scheduler's first drain, ahead of its second.
    setImmediate(() => log.push("loop"))
    while (log.filter((x) => x.startsWith("t")).length < 8) await nextLoopTurn()
    expect(log).toEqual(["t0", "t1", "t2", "loop", "t3", "t4", "t5", "t6", "t7"])
  })

  it("yields between batches too: tasks scheduled by a spent slice wait for the next one", async () => {
    const clock = counterClock()
    const scheduler = SlicedScheduler.make({ sliceMillis: 1, now: clock.now })
    const log: Array<string> = []
    scheduler.scheduleTask(() => {
      log.push("first")
      clock.spend(1)
      scheduler.scheduleTask(() => log.push("second"), 0)
    }, 0)
    setImmediate(() => log.push("loop"))
    while (!log.includes("second")) await nextLoopTurn()
    expect(log).toEqual(["first", "loop", "second"])
  })

  it.effect("runs a program of many fibers to the same results as the default scheduler", () =>
    Effect.gen(function*() {
      const program = Effect.forEach(
        Array.from({ length: 200 }, (_, i) => i),
        (i) =>
          Effect.gen(function*() {
            let sum = 0
            for (let k = 0; k < 50; k++) {
              sum += k * i
              yield* Effect.yieldNow()
            }
            return sum
          }),
        { concurrency: "unbounded" }
      )
      const expected = yield* program
      const sliced = yield* Effect.withScheduler(program, SlicedScheduler.make())
      expect(sliced).toEqual(expected)
    }))

  it.live("lets the event loop in while fibers keep each other busy", () =>
    Effect.gen(function*() {
      const clock = counterClock()
      const scheduler = SlicedScheduler.make({ sliceMillis: 5, now: clock.now })
      const loopRan = yield* Deferred.make<void>()
      let turnsBeforeLoop = 0
      // Ten fibers that never wait on anything but each other.
      const busy = Effect.forEach(
        Array.from({ length: 10 }),
        () =>
          Effect.gen(function*() {
            while (!(yield* Deferred.isDone(loopRan))) {
              turnsBeforeLoop++
              clock.spend(1)
              yield* Effect.yieldNow()
            }
          }),
        { concurrency: "unbounded", discard: true }
      )
      const fiber = yield* Effect.fork(Effect.withScheduler(busy, scheduler))
      setImmediate(() => Deferred.unsafeDone(loopRan, Effect.void))
      yield* Fiber.join(fiber)
      // Under the default scheduler the loop would wait for 2,048 rounds of all ten.
      expect(turnsBeforeLoop).toBeLessThan(100)
    }))

  it.effect("as a layer, it is the scheduler of the program and of the fibers it forks", () =>
    Effect.gen(function*() {
      const scheduler = SlicedScheduler.make()
      const seen = yield* Effect.gen(function*() {
        const current = FiberRef.get(FiberRef.currentScheduler)
        const own = yield* current
        const forked = yield* Effect.fork(current).pipe(Effect.flatMap(Fiber.join))
        return [own, forked]
      }).pipe(Effect.provide(SlicedScheduler.layer({ sliceMillis: 1 })), Effect.withScheduler(scheduler))
      // The layer's scheduler wins over the one outside it.
      for (const s of seen) expect(s).not.toBe(scheduler)
      expect(seen[0]).not.toBe(Scheduler.defaultScheduler)
      expect(seen[0]).toBe(seen[1])
    }))
})
