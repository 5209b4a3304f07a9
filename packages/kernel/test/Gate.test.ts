import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { expect, layer } from "@effect/vitest"
import { Gate } from "@skein/kernel"
import { Duration, Effect, Option, Ref, TestClock } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"

const T = Date.UTC(2026, 0, 1)
const HOUR = 3_600_000

const tempDir = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "skein-gate-" }))

const touch = (file: string, at: number) => {
  fs.writeFileSync(file, "")
  fs.utimesSync(file, new Date(at), new Date(at))
}

/** A gate that records each evaluation in `calls` and answers `decision`. */
const counted = <A>(name: string, calls: Ref.Ref<Array<string>>, decision: Gate.Decision<A>) =>
  Gate.make(name, Effect.as(Ref.update(calls, (names) => [...names, name]), decision))

layer(NodeContext.layer)("Gate", (it) => {
  it.effect("runs gates in order and reports every value when all pass", () =>
    Effect.gen(function*() {
      const calls = yield* Ref.make<Array<string>>([])
      const outcome = yield* Gate.evaluate([
        counted("time", calls, Gate.pass()),
        counted("activity", calls, Gate.pass(7)),
        counted("lock", calls, Gate.pass("held"))
      ])
      expect(yield* Ref.get(calls)).toEqual(["time", "activity", "lock"])
      expect(outcome).toEqual({ _tag: "Passed", values: [undefined, 7, "held"], gates: ["time", "activity", "lock"] })
      if (outcome._tag === "Passed") {
        const [, count, lock] = outcome.values
        // The tuple is typed per gate.
        expect(count + 1).toBe(8)
        expect(lock.toUpperCase()).toBe("HELD")
      }
    }))

  it.effect("stops at the first gate that says no, names it, and never runs the gates after it", () =>
    Effect.gen(function*() {
      const calls = yield* Ref.make<Array<string>>([])
      const outcome = yield* Gate.evaluate([
        counted("time", calls, Gate.pass()),
        counted("activity", calls, Gate.stop("2 sessions, fewer than 5")),
        counted("lock", calls, Gate.pass("held"))
      ])
      expect(outcome).toEqual({
        _tag: "Stopped",
        gate: "activity",
        reason: "2 sessions, fewer than 5",
        passed: ["time"]
      })
      expect(yield* Ref.get(calls)).toEqual(["time", "activity"])
      yield* Ref.set(calls, [])
      const first = yield* Gate.evaluate([
        counted("time", calls, Gate.stop("too soon")),
        counted("activity", calls, Gate.pass(1))
      ])
      expect(first).toMatchObject({ _tag: "Stopped", gate: "time", passed: [] })
      expect(yield* Ref.get(calls)).toEqual(["time"])
      // No gates: nothing stops.
      expect(yield* Gate.evaluate([])).toEqual({ _tag: "Passed", values: [], gates: [] })
    }))

  it.effect("a failing gate fails the evaluation and stops it", () =>
    Effect.gen(function*() {
      const calls = yield* Ref.make<Array<string>>([])
      const error = yield* Effect.flip(Gate.evaluate([
        Gate.make("scan", Effect.fail("unreadable")),
        counted("lock", calls, Gate.pass(1))
      ]))
      expect(error).toBe("unreadable")
      expect(yield* Ref.get(calls)).toEqual([])
    }))

  it.effect("throttle runs the check at most once per interval and answers with the last decision between", () =>
    Effect.gen(function*() {
      const scans = yield* Ref.make(0)
      const gate = yield* Gate.throttle(
        Gate.make(
          "activity",
          Effect.map(Ref.updateAndGet(scans, (n) => n + 1), (n) => n < 3 ? Gate.stop(`scan ${n}`) : Gate.pass(n))
        ),
        Duration.minutes(10)
      )
      expect(yield* gate.check).toEqual(Gate.stop("scan 1"))
      yield* TestClock.adjust(Duration.minutes(9))
      expect(yield* gate.check).toEqual(Gate.stop("scan 1"))
      expect(yield* gate.check).toEqual(Gate.stop("scan 1"))
      expect(yield* Ref.get(scans)).toBe(1)
      yield* TestClock.adjust(Duration.minutes(1))
      expect(yield* gate.check).toEqual(Gate.stop("scan 2"))
      yield* TestClock.adjust(Duration.minutes(10))
      expect(yield* gate.check).toEqual(Gate.pass(3))
      expect(yield* gate.check).toEqual(Gate.pass(3))
      expect(yield* Ref.get(scans)).toBe(3)
    }))

  it.effect("throttle does not remember failures", () =>
    Effect.gen(function*() {
      const runs = yield* Ref.make(0)
      const gate = yield* Gate.throttle(
        Gate.make(
          "scan",
          Effect.flatMap(Ref.updateAndGet(runs, (n) => n + 1), (n) => n === 1 ? Effect.fail("io") : Effect.succeed(Gate.pass(n)))
        ),
        Duration.minutes(10)
      )
      expect(yield* Effect.flip(gate.check)).toBe("io")
      expect(yield* gate.check).toEqual(Gate.pass(2))
      expect(yield* gate.check).toEqual(Gate.pass(2))
      expect(yield* Ref.get(runs)).toBe(2)
    }))

  it.scoped("time gate: one stat of the lock's mtime against the Clock; a missing lock passes", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T)
      const dir = yield* tempDir
      const lock = path.join(dir, ".consolidate-lock")
      const gate = Gate.elapsed({ path: lock, minimum: Duration.hours(24) })
      expect(gate.name).toBe("time")
      expect(yield* gate.check).toEqual(Gate.pass())
      touch(lock, T - 23 * HOUR)
      const stopped = yield* gate.check
      expect(stopped._tag).toBe("Stop")
      if (stopped._tag === "Stop") expect(stopped.reason).toContain("23h")
      yield* TestClock.adjust(Duration.hours(1))
      expect(yield* gate.check).toEqual(Gate.pass())
    }))

  it.scoped("activity gate: counts files modified since the last run, filtered, scanning at most every 10 minutes", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T)
      const dir = yield* tempDir
      const lock = path.join(dir, ".consolidate-lock")
      const sessions = path.join(dir, "sessions")
      fs.mkdirSync(sessions)
      touch(lock, T - 30 * HOUR)
      touch(path.join(sessions, "old.jsonl"), T - 40 * HOUR)
      touch(path.join(sessions, "current.jsonl"), T - HOUR)
      touch(path.join(sessions, "notes.txt"), T - HOUR)
      for (const name of ["a", "b", "c", "d"]) touch(path.join(sessions, `${name}.jsonl`), T - HOUR)
      const seen = yield* Ref.make(0)
      const include = (name: string) => {
        Effect.runSync(Ref.update(seen, (n) => n + 1))
        return name.endsWith(".jsonl") && name !== "current.jsonl"
      }
      const gate = yield* Gate.activity({ directory: sessions, since: lock, atLeast: 5, include })
      expect(yield* gate.check).toEqual(Gate.stop("4 modified since the last run, fewer than 5"))
      expect(yield* Ref.get(seen)).toBe(7)
      touch(path.join(sessions, "e.jsonl"), T)
      // Within the interval the scan does not run again.
      yield* TestClock.adjust(Duration.minutes(5))
      expect(yield* gate.check).toEqual(Gate.stop("4 modified since the last run, fewer than 5"))
      expect(yield* Ref.get(seen)).toBe(7)
      yield* TestClock.adjust(Duration.minutes(5))
      expect(yield* gate.check).toEqual(Gate.pass(5))
      expect(yield* Ref.get(seen)).toBe(15)
      // A missing directory is no activity.
      const empty = yield* Gate.activity({ directory: path.join(dir, "none"), since: lock, atLeast: 1 })
      expect(yield* empty.check).toMatchObject({ _tag: "Stop" })
    }))

  it.scoped("lock gate: hands the held lock to the caller; a second trigger is stopped by the holder", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T)
      const dir = yield* tempDir
      const lock = path.join(dir, ".consolidate-lock")
      const gate = Gate.lock({ path: lock })
      const first = yield* Gate.evaluate([gate])
      expect(first._tag).toBe("Passed")
      const second = yield* Effect.scoped(Gate.evaluate([gate]))
      expect(second).toEqual({
        _tag: "Stopped",
        gate: "lock",
        reason: `held by pid ${process.pid} since ${new Date(T).toISOString()}`,
        passed: []
      })
      if (first._tag === "Passed") {
        const [held] = first.values
        yield* held.commit
      }
      expect(fs.statSync(lock).mtimeMs).toBe(T)
    }))

  it.scoped("the three gates, cheapest first: a recent run stops at the stat, before any scan or lock", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T)
      const dir = yield* tempDir
      const lock = path.join(dir, ".consolidate-lock")
      const sessions = path.join(dir, "sessions")
      fs.mkdirSync(sessions)
      for (const name of ["a", "b", "c", "d", "e"]) touch(path.join(sessions, `${name}.jsonl`), T - 3 * HOUR)
      const scanned = yield* Ref.make(0)
      const include = (name: string) => {
        Effect.runSync(Ref.update(scanned, (n) => n + 1))
        return name.endsWith(".jsonl")
      }
      const gates = [
        Gate.elapsed({ path: lock, minimum: Duration.hours(24) }),
        yield* Gate.activity({ directory: sessions, since: lock, atLeast: 5, include }),
        Gate.lock({ path: lock })
      ] as const
      touch(lock, T - 2 * HOUR)
      const early = yield* Effect.scoped(Gate.evaluate(gates))
      expect(early).toMatchObject({ _tag: "Stopped", gate: "time", passed: [] })
      expect(yield* Ref.get(scanned)).toBe(0)
      expect(fs.statSync(lock).mtimeMs).toBe(T - 2 * HOUR)
      // A day later: five sessions, but all touched before the last run.
      yield* TestClock.adjust(Duration.hours(23))
      const quiet = yield* Effect.scoped(Gate.evaluate(gates))
      expect(quiet).toMatchObject({ _tag: "Stopped", gate: "activity", passed: ["time"] })
      yield* TestClock.adjust(Duration.minutes(10))
      for (const name of ["a", "b", "c", "d", "e"]) touch(path.join(sessions, `${name}.jsonl`), T + 22 * HOUR)
      const outcome = yield* Gate.evaluate(gates)
      expect(outcome).toMatchObject({ _tag: "Passed", gates: ["time", "activity", "lock"] })
      if (outcome._tag === "Passed") {
        const [, count, held] = outcome.values
        expect(count).toBe(5)
        expect(held.previous).toEqual(Option.some(new Date(T - 2 * HOUR)))
        yield* held.commit
      }
      expect(fs.statSync(lock).mtimeMs).toBe(T + 23 * HOUR + 10 * 60_000)
    }))
})
