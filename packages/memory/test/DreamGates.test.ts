import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { expect, layer } from "@effect/vitest"
import { FileLock } from "@skein/kernel"
import { DreamGates } from "@skein/memory"
import { SessionIndex, TranscriptLayout } from "@skein/store"
import { Duration, Effect, Exit, Option, Scope, TestClock } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"

const T = Date.UTC(2026, 0, 1)
const HOUR = 3_600_000

const touch = (file: string, at: number, content = "") => {
  fs.writeFileSync(file, content)
  fs.utimesSync(file, new Date(at), new Date(at))
}

/** The platform's FileSystem, counting the calls that cost: stats and directory listings. */
const counting = (calls: Array<string>) =>
  Effect.map(FileSystem.FileSystem, (fs) =>
    FileSystem.FileSystem.of({
      ...fs,
      stat: (p) => Effect.zipRight(Effect.sync(() => calls.push(`stat ${path.basename(p)}`)), fs.stat(p)),
      readDirectory: (p, o) => Effect.zipRight(Effect.sync(() => calls.push(`list ${path.basename(p)}`)), fs.readDirectory(p, o))
    }))

/** A project folder with `sessions` other transcripts modified an hour ago, and the current one. */
const project = (sessions: number) =>
  Effect.gen(function*() {
    const root = yield* Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "skein-dream-" }))
    const projectDir = path.join(root, "project")
    const memoryDir = path.join(projectDir, "memory")
    fs.mkdirSync(memoryDir, { recursive: true })
    for (let i = 0; i < sessions; i++) touch(path.join(projectDir, `other-${i}.jsonl`), T - HOUR)
    touch(path.join(projectDir, "current.jsonl"), T - HOUR)
    touch(path.join(projectDir, "notes.txt"), T - HOUR)
    return { projectDir, memoryDir, lock: path.join(memoryDir, ".consolidate-lock") }
  })

const deadPid = Effect.scoped(
  Effect.gen(function*() {
    const child = yield* Command.start(Command.make(process.execPath, "-e", ""))
    yield* child.exitCode
    return child.pid
  })
)

layer(NodeContext.layer)("DreamGates", (it) => {
  it.scoped("a turn 23 h after the last dream stops at the time gate with one stat and nothing else", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T)
      const p = yield* project(9)
      touch(p.lock, T - 23 * HOUR)
      const calls: Array<string> = []
      const gates = yield* DreamGates.make({ ...p, currentSessionId: "current" })
      const outcome = yield* gates.evaluate.pipe(Effect.provideServiceEffect(FileSystem.FileSystem, counting(calls)))
      expect(outcome).toMatchObject({ _tag: "Stopped", gate: "time", passed: [] })
      expect(calls).toEqual(["stat .consolidate-lock"])
      // The lock was not touched.
      expect(fs.statSync(p.lock).mtimeMs).toBe(T - 23 * HOUR)
    }))

  it.scoped("4 other sessions modified since stop at the activity gate; the current one is not counted; the scan is throttled", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T)
      const p = yield* project(4)
      touch(p.lock, T - 25 * HOUR)
      const calls: Array<string> = []
      const gates = yield* DreamGates.make({ ...p, currentSessionId: "current" })
      const run = Effect.scoped(gates.evaluate).pipe(Effect.provideServiceEffect(FileSystem.FileSystem, counting(calls)))
      const outcome = yield* run
      expect(outcome).toMatchObject({ _tag: "Stopped", gate: "activity", passed: ["time"] })
      if (outcome._tag === "Stopped") expect(outcome.reason).toContain("4 modified")
      expect(calls.filter((c) => c.startsWith("list"))).toEqual(["list project"])
      // A fifth session shows up; within 10 minutes the scan is not repeated.
      touch(path.join(p.projectDir, "other-new.jsonl"), T)
      yield* TestClock.adjust(Duration.minutes(9))
      expect(yield* run).toMatchObject({ _tag: "Stopped", gate: "activity" })
      expect(calls.filter((c) => c.startsWith("list")).length).toBe(1)
      yield* TestClock.adjust(Duration.minutes(1))
      const passed = yield* run
      expect(passed).toMatchObject({ _tag: "Passed", gates: ["time", "activity", "lock"] })
      if (passed._tag === "Passed") expect(passed.values[1]).toBe(5)
      expect(calls.filter((c) => c.startsWith("list")).length).toBe(2)
      // The scope closed without commit: the lock's mtime is back where it was.
      expect(fs.statSync(p.lock).mtimeMs).toBe(T - 25 * HOUR)
    }))

  it.scoped("a live lock holder stops the lock gate and keeps its lock", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T)
      const p = yield* project(6)
      // A window shorter than the lock's staleness, so a live holder is reached past the time gate.
      const config = { minInterval: Duration.minutes(30) }
      const holderScope = yield* Scope.make()
      const holder = yield* FileLock.acquire(p.lock).pipe(Scope.extend(holderScope))
      yield* TestClock.adjust(Duration.minutes(40))
      for (let i = 0; i < 6; i++) touch(path.join(p.projectDir, `other-${i}.jsonl`), T + 35 * 60_000)
      const gates = yield* DreamGates.make({ ...p, config })
      const outcome = yield* Effect.scoped(gates.evaluate)
      expect(outcome).toMatchObject({ _tag: "Stopped", gate: "lock", passed: ["time", "activity"] })
      if (outcome._tag === "Stopped") expect(outcome.reason).toContain(`pid ${process.pid}`)
      const status = yield* FileLock.status(p.lock)
      expect(Option.map(status, (s) => s.mtime.getTime())).toEqual(Option.some(holder.acquiredAt.getTime()))
      yield* holder.commit
      yield* Scope.close(holderScope, Exit.void)
      // With the default 24 h the same holder would have stopped the time gate with one stat.
      const strict = yield* DreamGates.make(p)
      expect(yield* Effect.scoped(strict.evaluate)).toMatchObject({ _tag: "Stopped", gate: "time" })
    }))

  it.scoped("a dead holder's day-old lock is taken over; commit stamps the new last run", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T)
      const p = yield* project(5)
      const dead = yield* deadPid
      touch(p.lock, T - 25 * HOUR, `${dead}\n`)
      const gates = yield* DreamGates.make({ ...p, currentSessionId: "current" })
      const outcome = yield* gates.evaluate
      expect(outcome._tag).toBe("Passed")
      if (outcome._tag !== "Passed") return
      const lock = outcome.values[2]
      expect(fs.readFileSync(p.lock, "utf8").split("\n")[0]).toBe(String(process.pid))
      expect(lock.previous).toEqual(Option.some(new Date(T - 25 * HOUR)))
      yield* lock.commit
      expect(fs.statSync(p.lock).mtimeMs).toBe(T)
      expect(yield* Effect.scoped(gates.evaluate)).toMatchObject({ _tag: "Stopped", gate: "time" })
    }))

  it.scoped("the lock gate re-checks the time under the lock: a dream another process just finished stops it", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T)
      const p = yield* project(5)
      touch(p.lock, T - 25 * HOUR)
      // Both saw the old mtime at the time gate; the other one consolidated first.
      const other = yield* Effect.scoped(Effect.flatMap(FileLock.acquire(p.lock), (l) => l.commit))
      expect(other).toBeUndefined()
      const before = fs.statSync(p.lock, { bigint: true }).mtimeNs
      const outcome = yield* Effect.scoped(DreamGates.lockGate(p.lock, DreamGates.defaultConfig).check)
      expect(outcome).toMatchObject({ _tag: "Stop" })
      if (outcome._tag === "Stop") expect(outcome.reason).toContain("by another process meanwhile")
      expect(fs.statSync(p.lock, { bigint: true }).mtimeNs).toBe(before)
    }))

  it.scoped("with the SessionIndex, the memory workers' own forks are not activity", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(T)
      const p = yield* project(6)
      touch(p.lock, T - 25 * HOUR)
      const root = path.dirname(p.projectDir)
      const sessions = yield* SessionIndex.make.pipe(Effect.provide(TranscriptLayout.layer(root)))
      yield* sessions.markWorker("other-0", { parentSessionId: "current", label: "memory-extraction" })
      yield* sessions.markWorker("other-1", { parentSessionId: "current", label: "dream" })
      const gates = yield* DreamGates.make({ ...p, currentSessionId: "current", sessions })
      const outcome = yield* Effect.scoped(gates.evaluate)
      expect(outcome).toMatchObject({ _tag: "Stopped", gate: "activity", reason: "4 sessions modified since the last run, fewer than 5" })
      // The plain directory scan would have counted the forks.
      const plain = yield* DreamGates.make({ ...p, currentSessionId: "current" })
      expect(yield* Effect.scoped(plain.evaluate)).toMatchObject({ _tag: "Passed" })
    }))
})
