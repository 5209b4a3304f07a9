/**
 * The stage runner's parallel map: bounded, in completion order, and on the
 * first failure nothing new starts and what is in flight is interrupted.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Ref, Stream } from "effect"
import { mapUnordered } from "../src/internal/mapUnordered.js"

/** Lets the other fibers run until `done` holds (no clock: they only need turns). */
const settled = (done: Effect.Effect<boolean>) =>
  Effect.gen(function*() {
    for (let turn = 0; turn < 10_000; turn++) {
      if (yield* done) return
      yield* Effect.yieldNow()
    }
    return yield* Effect.dieMessage("the fibers did not get there")
  })

describe("mapUnordered", () => {
  it.effect("runs at most `concurrency` at once and emits outputs as they complete", () =>
    Effect.gen(function*() {
      const gates = yield* Effect.forEach([0, 1, 2, 3, 4], () => Deferred.make<void>())
      const running = yield* Ref.make(0)
      const most = yield* Ref.make(0)
      const started = yield* Ref.make<ReadonlyArray<number>>([])
      const out = yield* Ref.make<ReadonlyArray<number>>([])
      const work = (i: number) =>
        Effect.gen(function*() {
          yield* Ref.update(started, (s) => [...s, i])
          const now = yield* Ref.updateAndGet(running, (n) => n + 1)
          yield* Ref.update(most, (m) => Math.max(m, now))
          yield* Deferred.await(gates[i]!)
          yield* Ref.update(running, (n) => n - 1)
          return i * 10
        })
      const fiber = yield* Effect.fork(
        Stream.runForEach(mapUnordered(Stream.make(0, 1, 2, 3, 4), work, 2), (b) => Ref.update(out, (o) => [...o, b]))
      )
      yield* settled(Effect.map(Ref.get(started), (s) => s.length === 2))
      expect(yield* Ref.get(started)).toEqual([0, 1])
      // The second finishes first and comes out first; its slot goes to the third.
      for (const [i, outputs] of [[1, 1], [2, 2], [0, 3], [4, 4], [3, 5]] as const) {
        yield* Deferred.succeed(gates[i]!, void 0)
        yield* settled(Effect.map(Ref.get(out), (o) => o.length === outputs))
      }
      yield* Fiber.join(fiber)
      expect(yield* Ref.get(out)).toEqual([10, 20, 0, 40, 30])
      expect(yield* Ref.get(started)).toEqual([0, 1, 2, 3, 4])
      expect(yield* Ref.get(most)).toBe(2)
    }))

  it.effect("the first failure starts nothing new, interrupts what is in flight, and fails the stream", () =>
    Effect.gen(function*() {
      const started = yield* Ref.make<ReadonlyArray<number>>([])
      const interrupted = yield* Ref.make<ReadonlyArray<number>>([])
      const fail = yield* Deferred.make<void>()
      const work = (i: number) =>
        Effect.gen(function*() {
          yield* Ref.update(started, (s) => [...s, i])
          if (i === 1) {
            yield* Deferred.await(fail)
            return yield* Effect.fail(`item ${i} failed`)
          }
          return yield* Effect.never
        }).pipe(Effect.onInterrupt(() => Ref.update(interrupted, (s) => [...s, i])))
      const fiber = yield* Effect.fork(Stream.runCollect(mapUnordered(Stream.range(0, 9), work, 3)))
      yield* settled(Effect.map(Ref.get(started), (s) => s.length === 3))
      yield* Deferred.succeed(fail, void 0)
      const exit = yield* Fiber.await(fiber)
      expect(exit).toEqual(Exit.fail("item 1 failed"))
      expect(yield* Ref.get(started)).toEqual([0, 1, 2])
      expect([...(yield* Ref.get(interrupted))].sort()).toEqual([0, 2])
    }))

  it.effect("an input that fails fails the stream and interrupts what is in flight", () =>
    Effect.gen(function*() {
      const interrupted = yield* Ref.make(0)
      const input = Stream.concat(Stream.make(1, 2), Stream.fail("input broke"))
      const exit = yield* Effect.exit(Stream.runCollect(
        mapUnordered(input, () => Effect.onInterrupt(Effect.never, () => Ref.update(interrupted, (n) => n + 1)), 4)
      ))
      expect(exit).toEqual(Exit.fail("input broke"))
      expect(yield* Ref.get(interrupted)).toBe(2)
    }))
})
