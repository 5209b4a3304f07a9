import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { expect, layer } from "@effect/vitest"
import { FileLock } from "@skein/kernel"
import { Deferred, Duration, Effect, Exit, Fiber, Option, Stream, TestClock } from "effect"
import * as TsChild from "@skein/testkit/TsChild"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const T = Date.UTC(2026, 0, 1)
const here = path.dirname(fileURLToPath(import.meta.url))
const repoRoot = path.resolve(here, "../../..")
const racer = path.join(here, "fixtures", "lock-racer.ts")

const tempDir = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "skein-lock-" }))

/** The mtime in nanoseconds, for exact comparisons. */
const mtimeNs = (file: string): bigint => fs.statSync(file, { bigint: true }).mtimeNs

const firstLine = (file: string): string => fs.readFileSync(file, "utf8").split("\n")[0] ?? ""

/** The pid of a process that has exited and been reaped. */
const deadPid = Effect.scoped(
  Effect.gen(function*() {
    const child = yield* Command.start(Command.make(process.execPath, "-e", ""))
    yield* child.exitCode
    return child.pid
  })
)

/** The files beside the lock (claims, prevs, temps): none should be left. */
const leftovers = (dir: string, lock: string): Array<string> =>
  fs.readdirSync(dir).filter((name) => name.startsWith(path.basename(lock) + "."))

layer(NodeContext.layer)("FileLock", (it) => {
  it.scoped("acquires a missing lock; commit frees it and keeps the acquisition time as its mtime", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T)
      const dir = yield* tempDir
      const file = path.join(dir, ".consolidate-lock")
      const lock = yield* FileLock.acquire(file)
      expect(firstLine(file)).toBe(String(process.pid))
      expect(lock.previous).toEqual(Option.none())
      expect(lock.acquiredAt.getTime()).toBe(T)
      expect(fs.statSync(file).mtimeMs).toBe(T)
      yield* TestClock.adjust(Duration.minutes(30))
      yield* lock.commit
      const status = yield* FileLock.status(file)
      expect(Option.map(status, (s) => s.pid)).toEqual(Option.some(Option.none()))
      expect(yield* FileLock.lastRun(file)).toEqual(Option.some(new Date(T)))
      expect(leftovers(dir, file)).toEqual([])
      // Times that are not whole seconds are stamped to the millisecond as well.
      const odd = path.join(dir, "odd")
      for (const ms of [1, 123, 999, 456_789]) {
        yield* TestClock.setTime(T + ms)
        yield* Effect.scoped(Effect.flatMap(FileLock.acquire(odd), (held) => held.commit))
        expect(fs.statSync(odd).mtimeMs).toBe(T + ms)
      }
      yield* TestClock.setTime(T + 30 * 60_000)
      // A committed lock is free: the next acquisition sees the last run as its previous.
      const next = yield* Effect.scoped(
        Effect.map(FileLock.acquire(file), (held) => held.previous)
      )
      expect(next).toEqual(Option.some(new Date(T)))
    }))

  it.scoped("a live, fresh lock is not taken over: LockHeld with the holder's pid and time", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T)
      const dir = yield* tempDir
      const file = path.join(dir, "lock")
      yield* FileLock.acquire(file)
      yield* TestClock.adjust(Duration.minutes(59))
      const error = yield* Effect.flip(Effect.scoped(FileLock.acquire(file)))
      expect(error._tag).toBe("LockHeld")
      if (error._tag === "LockHeld") {
        expect(error.pid).toBe(process.pid)
        expect(error.since).toEqual(new Date(T))
      }
      // A foreign lock file (a bare pid) of a live process is respected too.
      const foreign = path.join(dir, "foreign")
      fs.writeFileSync(foreign, `${process.ppid}`)
      fs.utimesSync(foreign, new Date(T), new Date(T))
      const held = yield* Effect.flip(Effect.scoped(FileLock.acquire(foreign)))
      expect(held).toMatchObject({ _tag: "LockHeld", pid: process.ppid })
    }))

  it.scoped("takes over a lock whose holder is dead", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T)
      const dir = yield* tempDir
      const pid = yield* deadPid
      const file = path.join(dir, "lock")
      fs.writeFileSync(file, `${pid}\n`)
      fs.utimesSync(file, new Date(T - 1000), new Date(T - 1000))
      const before = mtimeNs(file)
      const lock = yield* FileLock.acquire(file)
      expect(firstLine(file)).toBe(String(process.pid))
      // A foreign file is itself the previous version; rollback puts it back exactly.
      expect(lock.previous).toEqual(Option.some(new Date(T - 1000)))
      yield* lock.rollback
      expect(firstLine(file)).toBe(String(pid))
      expect(mtimeNs(file)).toBe(before)
      expect(leftovers(dir, file)).toEqual([])
    }))

  it.scoped("taking over a crashed holder inherits its previous version, so rollback restores the last real run", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T)
      const dir = yield* tempDir
      const file = path.join(dir, "lock")
      // A run that committed at T - 2 days, then a run that crashed at T - 1 day.
      yield* TestClock.setTime(T - 2 * 86_400_000)
      yield* Effect.scoped(Effect.flatMap(FileLock.acquire(file), (held) => held.commit))
      const committed = mtimeNs(file)
      yield* TestClock.setTime(T - 86_400_000)
      const crashed = yield* FileLock.acquire(file)
      const pid = yield* deadPid
      const nonce = fs.readFileSync(file, "utf8").split("\n")[1]
      // Rewrite the holder as a dead process, keeping the crashed run's mtime.
      const stamp = fs.statSync(file).mtime
      fs.renameSync(file, `${file}.moved`)
      fs.writeFileSync(file, `${pid}\n${nonce}\n`)
      fs.utimesSync(file, stamp, stamp)
      fs.unlinkSync(`${file}.moved`)
      yield* TestClock.setTime(T)
      const lock = yield* FileLock.acquire(file)
      expect(lock.previous).toEqual(Option.some(new Date(T - 2 * 86_400_000)))
      yield* lock.rollback
      expect(mtimeNs(file)).toBe(committed)
      expect(Option.map(yield* FileLock.status(file), (s) => s.pid)).toEqual(Option.some(Option.none()))
      // The crashed holder finds out it no longer holds the lock.
      const lost = yield* Effect.flip(crashed.commit)
      expect(lost._tag).toBe("LockLost")
      expect(leftovers(dir, file)).toEqual([])
    }))

  it.scoped("takes over a live holder's lock once it is older than staleAfter; the old holder gets LockLost", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T)
      const dir = yield* tempDir
      const file = path.join(dir, "lock")
      const first = yield* FileLock.acquire(file)
      yield* TestClock.adjust(Duration.minutes(61))
      const second = yield* FileLock.acquire(file)
      expect(second.acquiredAt.getTime()).toBe(T + 61 * 60_000)
      expect(yield* Effect.flip(first.commit)).toMatchObject({ _tag: "LockLost" })
      expect(firstLine(file)).toBe(String(process.pid))
      expect(fs.statSync(file).mtimeMs).toBe(T + 61 * 60_000)
      // By age through the file itself: a live pid, mtime set back past staleAfter.
      const foreign = path.join(dir, "foreign")
      fs.writeFileSync(foreign, `${process.ppid}\n`)
      fs.utimesSync(foreign, new Date(T), new Date(T))
      const taken = yield* FileLock.acquire(foreign, { staleAfter: Duration.minutes(30) })
      expect(taken.previous).toEqual(Option.some(new Date(T)))
      expect(firstLine(foreign)).toBe(String(process.pid))
    }))

  it.scoped("rollback restores the previous mtime exactly, to the nanosecond", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T)
      const dir = yield* tempDir
      const file = path.join(dir, "lock")
      // An empty file stamped by the kernel (sub-millisecond mtime) is a free lock.
      fs.writeFileSync(file, "")
      const before = mtimeNs(file)
      const content = fs.readFileSync(file)
      const lock = yield* FileLock.acquire(file)
      expect(mtimeNs(file)).not.toBe(before)
      yield* lock.rollback
      expect(mtimeNs(file)).toBe(before)
      expect(fs.readFileSync(file)).toEqual(content)
      // Idempotent: a second rollback or a commit afterwards changes nothing.
      yield* lock.rollback
      yield* lock.commit
      expect(mtimeNs(file)).toBe(before)
      expect(leftovers(dir, file)).toEqual([])
    }))

  it.scoped("rollback of a lock that did not exist before deletes it", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const file = path.join(dir, "lock")
      const lock = yield* FileLock.acquire(file)
      expect(fs.existsSync(file)).toBe(true)
      yield* lock.rollback
      expect(fs.existsSync(file)).toBe(false)
      expect(leftovers(dir, file)).toEqual([])
    }))

  it.scoped("interrupting the holder's scope rolls back; a committed scope does not", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T)
      const dir = yield* tempDir
      const file = path.join(dir, "lock")
      yield* Effect.scoped(Effect.flatMap(FileLock.acquire(file), (held) => held.commit))
      const before = mtimeNs(file)
      yield* TestClock.adjust(Duration.hours(25))
      const acquired = yield* Deferred.make<void>()
      const fiber = yield* Effect.fork(
        Effect.scoped(
          Effect.gen(function*() {
            yield* FileLock.acquire(file)
            yield* Deferred.succeed(acquired, undefined)
            return yield* Effect.never
          })
        )
      )
      yield* Deferred.await(acquired)
      expect(firstLine(file)).toBe(String(process.pid))
      expect(mtimeNs(file)).not.toBe(before)
      const exit = yield* Fiber.interrupt(fiber)
      expect(Exit.isInterrupted(exit)).toBe(true)
      expect(mtimeNs(file)).toBe(before)
      expect(firstLine(file)).toBe("")
      // A failure inside the scope rolls back as well.
      const failed = yield* Effect.exit(Effect.scoped(Effect.zipRight(FileLock.acquire(file), Effect.fail("boom"))))
      expect(Exit.isFailure(failed)).toBe(true)
      expect(mtimeNs(file)).toBe(before)
      expect(leftovers(dir, file)).toEqual([])
    }))

  it.scoped("a claim left by a dead process is replaced; a live one means LockHeld", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T)
      const dir = yield* tempDir
      const file = path.join(dir, "lock")
      const nonce = "0123456789abcdef0123"
      fs.writeFileSync(file, `\n${nonce}\n`)
      const pid = yield* deadPid
      const claim = `${file}.${nonce}.claim`
      fs.writeFileSync(claim, `${process.ppid}\nffffffffffffffffffff\n`)
      fs.utimesSync(claim, new Date(T), new Date(T))
      expect(yield* Effect.flip(Effect.scoped(FileLock.acquire(file)))).toMatchObject({
        _tag: "LockHeld",
        pid: process.ppid
      })
      fs.writeFileSync(claim, `${pid}\nffffffffffffffffffff\n`)
      fs.utimesSync(claim, new Date(T), new Date(T))
      yield* Effect.scoped(Effect.flatMap(FileLock.acquire(file), (held) => held.commit))
      expect(leftovers(dir, file)).toEqual([])
    }))

  it.scoped("many contenders taking over one dead holder's lock at once: exactly one wins, every round", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T)
      const dir = yield* tempDir
      const file = path.join(dir, "lock")
      const dead = yield* deadPid
      for (let round = 0; round < 40; round++) {
        const nonce = round.toString(16).padStart(20, "0")
        fs.writeFileSync(file, `${dead}\n${nonce}\n`)
        // Staggered by 0..31 file system round trips, so that some read
        // the dead holder's version just before the winner replaces it.
        const contender = (k: number) =>
          Effect.zipRight(
            Effect.forEach(Array.from({ length: k }), () => Effect.promise(() => fs.promises.stat(dir))),
            Effect.either(FileLock.acquire(file))
          )
        const results = yield* Effect.scoped(
          Effect.all(Array.from({ length: 32 }, (_, k) => contender(k)), { concurrency: "unbounded" })
        )
        const winners = results.filter((result) => result._tag === "Right")
        expect(winners.length).toBe(1)
        for (const result of results) {
          if (result._tag === "Left") expect(result.left._tag).toBe("LockHeld")
        }
        // The winner's scope closed: it had no previous version, so the lock is gone.
        expect(fs.existsSync(file)).toBe(false)
      }
      expect(leftovers(dir, file)).toEqual([])
    }))

  it.scoped("two OS processes race for one lock 500 times each and never hold it together", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const file = path.join(dir, "lock")
      const log = path.join(dir, "log")
      const iterations = 500
      const run = Effect.scoped(
        Effect.gen(function*() {
          const child = yield* Command.start(
            Command.make(process.execPath, ...TsChild.nodeArgs(racer), file, log, dir, String(iterations)).pipe(
              Command.workingDirectory(repoRoot)
            )
          )
          const [stdout, stderr, code] = yield* Effect.all(
            [
              Stream.mkString(Stream.decodeText(child.stdout)),
              Stream.mkString(Stream.decodeText(child.stderr)),
              child.exitCode
            ],
            { concurrency: "unbounded" }
          )
          expect(stderr).toBe("")
          expect(code).toBe(0)
          const report: { pid: number; acquired: number; held: number } = JSON.parse(stdout)
          return report
        })
      )
      const reports = yield* Effect.all([run, run], { concurrency: 2 })
      const lines = fs.readFileSync(log, "utf8").trim().split("\n")
      let holder: string | undefined
      let switches = 0
      let previous: string | undefined
      const entries = new Map<string, number>()
      for (const line of lines) {
        const [pid = "", event = ""] = line.split(" ")
        expect(event).not.toBe("overlap")
        if (event === "enter") {
          expect(holder).toBeUndefined()
          holder = pid
          entries.set(pid, (entries.get(pid) ?? 0) + 1)
          if (previous !== undefined && previous !== pid) switches++
          previous = pid
        } else {
          expect(event).toBe("exit")
          expect(holder).toBe(pid)
          holder = undefined
        }
      }
      expect(lines.length).toBe(4 * iterations)
      expect([...entries.values()]).toEqual([iterations, iterations])
      expect(reports.map((r) => r.acquired)).toEqual([iterations, iterations])
      // They really raced: each found the lock held by the other, and the lock changed hands.
      expect(reports.every((r) => r.held > 0)).toBe(true)
      expect(switches).toBeGreaterThan(0)
      // The last iteration (odd) rolled back to the free version of the commit before it.
      expect(Option.map(yield* FileLock.status(file), (s) => s.pid)).toEqual(Option.some(Option.none()))
      expect(leftovers(dir, file)).toEqual([])
    }), { timeout: 120_000 })
})
