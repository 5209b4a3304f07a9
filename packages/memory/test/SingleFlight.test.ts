import { expect, it } from "@effect/vitest"
import { SingleFlight } from "@skein/memory"
import { Deferred, Effect, Fiber, Queue, Ref } from "effect"

/** A job that records each run's start and waits for the test to let it finish. */
const gatedJob = Effect.gen(function*() {
  const starts = yield* Ref.make(0)
  const concurrent = yield* Ref.make(0)
  const maxConcurrent = yield* Ref.make(0)
  const release = yield* Queue.unbounded<Deferred.Deferred<void>>()
  const job = Effect.gen(function*() {
    yield* Ref.update(starts, (n) => n + 1)
    const now = yield* Ref.updateAndGet(concurrent, (n) => n + 1)
    yield* Ref.update(maxConcurrent, (m) => Math.max(m, now))
    const gate = yield* Deferred.make<void>()
    yield* Queue.offer(release, gate)
    yield* Deferred.await(gate)
    yield* Ref.update(concurrent, (n) => n - 1)
  })
  const finishOne = Effect.flatMap(Queue.take(release), (gate) => Deferred.succeed(gate, undefined))
  return { job, starts, maxConcurrent, finishOne }
})

it.scoped("10 requests during one run give exactly one trailing run, never two at once", () =>
  Effect.gen(function*() {
    const { finishOne, job, maxConcurrent, starts } = yield* gatedJob
    const flight = yield* SingleFlight.make(job)
    expect(yield* flight.request).toBe("started")
    yield* Effect.yieldNow()
    const answers = yield* Effect.forEach(Array.from({ length: 10 }), () => flight.request)
    expect(answers).toEqual(Array.from({ length: 10 }, () => "stashed"))
    expect((yield* flight.state)._tag).toBe("Stashed")
    yield* finishOne
    // The trailing run: the ten stashed requests owe one run, not ten.
    yield* finishOne
    yield* flight.idle
    expect(yield* Ref.get(starts)).toBe(2)
    expect(yield* Ref.get(maxConcurrent)).toBe(1)
    expect((yield* flight.state)._tag).toBe("Idle")
    // Idle again: the next request starts a run of its own.
    expect(yield* flight.request).toBe("started")
    yield* finishOne
    yield* flight.idle
    expect(yield* Ref.get(starts)).toBe(3)
  }))

it.scoped("a failing run is reported and the owed run still happens", () =>
  Effect.gen(function*() {
    const runs = yield* Ref.make(0)
    const failures = yield* Ref.make<Array<string>>([])
    const started = yield* Deferred.make<void>()
    const go = yield* Deferred.make<void>()
    const job = Effect.gen(function*() {
      const n = yield* Ref.updateAndGet(runs, (k) => k + 1)
      if (n === 1) {
        yield* Deferred.succeed(started, undefined)
        yield* Deferred.await(go)
        return yield* Effect.fail(`run ${n} failed`)
      }
    })
    const flight = yield* SingleFlight.make(job, (e) => Ref.update(failures, (fs) => [...fs, e]))
    yield* flight.request
    yield* Deferred.await(started)
    yield* flight.request
    yield* Deferred.succeed(go, undefined)
    yield* flight.idle
    expect(yield* Ref.get(runs)).toBe(2)
    expect(yield* Ref.get(failures)).toEqual(["run 1 failed"])
  }))

it.effect("closing the scope interrupts a run in progress", () =>
  Effect.gen(function*() {
    const interrupted = yield* Deferred.make<void>()
    const started = yield* Deferred.make<void>()
    const job = Effect.zipRight(Deferred.succeed(started, undefined), Effect.never).pipe(
      Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined))
    )
    const fiber = yield* Effect.fork(Effect.scoped(Effect.gen(function*() {
      const flight = yield* SingleFlight.make(job)
      yield* flight.request
      yield* Deferred.await(started)
    })))
    yield* Fiber.join(fiber)
    yield* Deferred.await(interrupted)
    expect(yield* Deferred.isDone(interrupted)).toBe(true)
  }))
