/**
 * Group commit for the work a scope close repeats per child: the /proc sweep
 * for escapees and the journal rewrite; and a scope close through ProcessHost.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Ref, Scope } from "effect"
import * as Batcher from "../src/internal/batcher.js"
import * as ProcessHost from "../src/ProcessHost.js"
import * as ProcessJournal from "../src/ProcessJournal.js"

const recording = Effect.gen(function*() {
  const runs = yield* Ref.make<ReadonlyArray<ReadonlyArray<number>>>([])
  const run = (batch: ReadonlyArray<number>) => Effect.as(Ref.update(runs, (all) => [...all, batch]), batch.map((n) => n * 10))
  return { runs, run }
})

describe("Batcher", () => {
  it.scoped("requests made in the same tick share one run, and each gets its own answer", () =>
    Effect.gen(function*() {
      const { run, runs } = yield* recording
      const batcher = yield* Batcher.make(run)
      const answers = yield* Effect.forEach([1, 2, 3, 4, 5], batcher.submit, { concurrency: "unbounded" })
      expect(answers).toEqual([10, 20, 30, 40, 50])
      expect(yield* Ref.get(runs)).toEqual([[1, 2, 3, 4, 5]])
    }))

  it.scoped("requests that arrive while a run is in progress are served together by the next run", () =>
    Effect.gen(function*() {
      const runs = yield* Ref.make<ReadonlyArray<ReadonlyArray<number>>>([])
      const entered = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const batcher = yield* Batcher.make((batch: ReadonlyArray<number>) =>
        Effect.gen(function*() {
          yield* Ref.update(runs, (all) => [...all, batch])
          if (batch.includes(1)) {
            yield* Deferred.succeed(entered, undefined)
            yield* Deferred.await(release)
          }
          return batch
        })
      )
      const first = yield* Effect.fork(batcher.submit(1))
      yield* Deferred.await(entered)
      const later = yield* Effect.fork(Effect.forEach([2, 3, 4], batcher.submit, { concurrency: "unbounded" }))
      yield* Effect.yieldNow({ priority: 1 })
      yield* Deferred.succeed(release, undefined)
      expect(Exit.isSuccess(yield* first.await)).toBe(true)
      expect(Exit.isSuccess(yield* later.await)).toBe(true)
      expect(yield* Ref.get(runs)).toEqual([[1], [2, 3, 4]])
    }))

  it.scoped("a batch waits for its gather: requests made meanwhile join it", () =>
    Effect.gen(function*() {
      const { run, runs } = yield* recording
      const gathered = yield* Deferred.make<void>()
      const batcher = yield* Batcher.make(run, { gather: Deferred.await(gathered) })
      const settle = Effect.repeatN(Effect.yieldNow({ priority: 1 }), 5)
      const first = yield* Effect.fork(batcher.submit(1))
      yield* settle
      const later = yield* Effect.forEach([2, 3], (n) => Effect.fork(batcher.submit(n)))
      yield* settle
      expect(yield* Ref.get(runs)).toEqual([])
      yield* Deferred.succeed(gathered, undefined)
      expect(yield* Fiber.join(first)).toBe(10)
      expect(yield* Effect.forEach(later, Fiber.join)).toEqual([20, 30])
      expect(yield* Ref.get(runs)).toEqual([[1, 2, 3]])
    }))

  it.effect("a defect in a run reaches every request of its batch", () =>
    Effect.scoped(Effect.gen(function*() {
      const batcher = yield* Batcher.make((_: ReadonlyArray<number>) => Effect.dieMessage("boom"))
      const exits = yield* Effect.forEach([1, 2], (n) => Effect.exit(batcher.submit(n)), { concurrency: "unbounded" })
      expect(exits.every(Exit.isFailure)).toBe(true)
    })))

  it.effect("after its scope closes, a request runs on its own in the caller's fiber", () =>
    Effect.gen(function*() {
      const { run, runs } = yield* recording
      const scope = yield* Scope.make()
      const batcher = yield* Scope.extend(Batcher.make(run), scope)
      yield* Scope.close(scope, Exit.void)
      expect(yield* batcher.submit(7)).toBe(70)
      expect(yield* Ref.get(runs)).toEqual([[7]])
    }))

  it.effect("made inside a finalizer, its scope still closes (its loop stays interruptible)", () =>
    Effect.gen(function*() {
      const { run } = yield* recording
      const answered = yield* Effect.uninterruptible(Effect.scoped(Effect.flatMap(Batcher.make(run), (b) => b.submit(2))))
      expect(answered).toBe(20)
    }))
})

/** An in-memory journal storage that counts its writes. */
const countingStorage = Effect.gen(function*() {
  const writes = yield* Ref.make(0)
  const inner = yield* ProcessJournal.memoryStorage
  const storage: ProcessJournal.Storage = {
    read: inner.read,
    update: (f) => Effect.zipRight(Ref.update(writes, (n) => n + 1), inner.update(f))
  }
  return { storage, writes }
})

describe("ProcessJournal batching", () => {
  it.scoped("the removals of one scope close are one write", () =>
    Effect.gen(function*() {
      const { storage, writes } = yield* countingStorage
      const journal = yield* ProcessJournal.make(storage)
      const pids = [101, 102, 103, 104, 105, 106, 107, 108]
      const identity = { source: "proc", startTime: "1", cmdline: "sleep\0" } as const
      yield* Effect.forEach(pids, (pid) => journal.record({ pid, pgid: pid, identity, command: "sleep" }), {
        concurrency: "unbounded"
      })
      expect((yield* journal.entries).map((e) => e.pid).sort()).toEqual(pids)
      expect(yield* Ref.get(writes)).toBe(1)
      yield* Effect.forEach(pids, journal.remove, { concurrency: "unbounded" })
      expect(yield* journal.entries).toEqual([])
      expect(yield* Ref.get(writes)).toBe(2)
    }))
})

describe("ProcessHost batching", () => {
  it.live("a scope close whose children exit at different times sweeps and rewrites the journal once", () =>
    Effect.gen(function*() {
      const { storage, writes } = yield* countingStorage
      yield* Effect.scoped(Effect.gen(function*() {
        const journal = yield* ProcessJournal.make(storage)
        const host = yield* ProcessHost.make({ reap: false }).pipe(
          Effect.provideService(ProcessJournal.ProcessJournal, journal)
        )
        // Like sessions: each child in its own scope, on its own fiber. Each
        // leader exits some time after its SIGTERM, so the releases ask for
        // their sweeps apart.
        const spawned = yield* Deferred.make<void>()
        const owner = yield* Effect.fork(Effect.forEach([0, 0.02], (delay, i) =>
          Effect.scoped(Effect.gen(function*() {
            yield* host.spawn({
              command: "sh",
              args: ["-c", `trap 'sleep ${delay}; exit 0' TERM; while :; do sleep 1; done`],
              stopTimeouts: { stdinGrace: 0, termGrace: "5 seconds" }
            })
            if (i === 1) yield* Deferred.succeed(spawned, undefined)
            return yield* Effect.never
          })), { concurrency: "unbounded" }))
        yield* Deferred.await(spawned)
        yield* Effect.sleep("50 millis")
        yield* Ref.set(writes, 0)
        yield* Fiber.interrupt(owner)
        expect(yield* Ref.get(writes)).toBe(1)
        expect(yield* journal.entries).toEqual([])
      }))
    }))
})
