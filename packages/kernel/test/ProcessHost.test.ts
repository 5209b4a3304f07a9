import { describe, expect, it } from "@effect/vitest"
import { Chunk, Duration, Effect, Exit, Fiber, Option, Scope, Stream, TestClock } from "effect"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import * as ProcessHost from "../src/ProcessHost.js"
import { guard, isAlive, realSleep, waitGone } from "./procs.js"

const node = process.execPath
const fast = { stdinGrace: Duration.millis(100), termGrace: Duration.millis(200) }
const host = ProcessHost.layerMemory({ stopTimeouts: fast })

const collect = (stream: Stream.Stream<Uint8Array>) =>
  Effect.map(Stream.runCollect(stream), (chunks) => Buffer.concat(Chunk.toArray(chunks)))

const firstLine = (stream: Stream.Stream<Uint8Array>) =>
  stream.pipe(Stream.decodeText(), Stream.splitLines, Stream.runHead, Effect.map(Option.getOrThrow))

/** Advances the TestClock by `by` once the stop sequence sleeps on it. */
const adjustWhenSleeping = (by: Duration.DurationInput) =>
  Effect.gen(function*() {
    while ((yield* TestClock.sleeps()).length === 0) yield* realSleep(5)
    yield* TestClock.adjust(by)
  })

const tempDir = () => NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), "skein-ph-"))

describe("ProcessHost", () => {
  it.scopedLive("streams stdout and stderr bytes intact, with a character split across writes", () =>
    Effect.gen(function*() {
      // "é€😀" written one byte at a time with pauses, so reads see partial characters.
      const script = `
        const bytes = Buffer.from("aé€😀z", "utf8")
        let i = 0
        const step = () => {
          if (i === bytes.length) return
          process.stdout.write(bytes.subarray(i, i + 1))
          process.stderr.write(bytes.subarray(i, i + 1))
          i++
          setTimeout(step, 5)
        }
        step()
      `
      const child = yield* ProcessHost.spawn({ command: node, args: ["-e", script] })
      const [stdout, stderr] = yield* Effect.all([collect(child.stdout), collect(child.stderr)], {
        concurrency: 2
      })
      const expected = Buffer.from("aé€😀z", "utf8")
      expect(stdout.equals(expected)).toBe(true)
      expect(stderr.equals(expected)).toBe(true)
      expect(stdout.toString("utf8")).toBe("aé€😀z")
      const exit = yield* child.await
      expect(exit).toEqual({ code: 0, signal: null, stderrTail: "aé€😀z" })
    }).pipe(Effect.provide(host)))

  it.scopedLive("pullStdout returns stdout's bytes in order, read by read, then None at its end, also after the exit", () =>
    Effect.gen(function*() {
      const pullAll = (pull: ProcessHost.ChildProcess["pullStdout"]) =>
        Effect.gen(function*() {
          const reads: Array<Buffer> = []
          for (;;) {
            const next = yield* Effect.option(pull)
            if (Option.isNone(next)) return reads
            reads.push(Buffer.concat(Chunk.toArray(next.value)))
          }
        })
      const slow = yield* ProcessHost.spawn({ command: "sh", args: ["-c", "printf 'a\\303'; sleep 0.2; printf '\\251b'; sleep 0.2; printf c"] })
      const reads = yield* pullAll(slow.pullStdout)
      expect(Buffer.concat(reads).toString("utf8")).toBe("aébc")
      expect(reads.length).toBeGreaterThan(1)
      // Once ended, it stays ended.
      expect(Option.isNone(yield* Effect.option(slow.pullStdout))).toBe(true)
      const done = yield* ProcessHost.spawn({ command: "sh", args: ["-c", "echo hello"] })
      yield* done.await
      expect(Buffer.concat(yield* pullAll(done.pullStdout)).toString("utf8")).toBe("hello\n")
    }).pipe(Effect.provide(host)))

  it.scopedLive("stdout written before the exit can still be read after it", () =>
    Effect.gen(function*() {
      const child = yield* ProcessHost.spawn({ command: "sh", args: ["-c", "echo hello; echo bye >&2"] })
      expect(yield* child.await).toEqual({ code: 0, signal: null, stderrTail: "bye\n" })
      expect((yield* collect(child.stdout)).toString("utf8")).toBe("hello\n")
      expect((yield* collect(child.stderr)).toString("utf8")).toBe("bye\n")
    }).pipe(Effect.provide(host)))

  it.scopedLive("stdin writes wait for drain when the pipe is full, and deliver every byte", () =>
    Effect.gen(function*() {
      const child = yield* ProcessHost.spawn({ command: "cat" })
      const payload = Buffer.alloc(8 * 1024 * 1024)
      for (let i = 0; i < payload.length; i++) payload[i] = (i * 31 + (i >> 12)) & 0xff
      const writer = yield* Effect.fork(Effect.zipRight(child.write(payload), child.closeStdin))
      // Nobody reads stdout, so cat blocks and the pipes (a few hundred KB) cannot take 8 MB.
      yield* realSleep(300)
      expect(Option.isNone(yield* Fiber.poll(writer))).toBe(true)
      const echoed = yield* collect(child.stdout)
      yield* Fiber.join(writer)
      expect(echoed.length).toBe(payload.length)
      expect(echoed.equals(payload)).toBe(true)
      expect((yield* child.await).code).toBe(0)
    }).pipe(Effect.provide(host)))

  it.scopedLive("many small writes keep their order under backpressure", () =>
    Effect.gen(function*() {
      const child = yield* ProcessHost.spawn({ command: "cat" })
      const lines = Array.from({ length: 20_000 }, (_, i) => `line ${i} ${"x".repeat(40)}\n`)
      const reader = yield* Effect.fork(collect(child.stdout))
      yield* Effect.forEach(lines, (line) => child.write(line), { discard: true })
      yield* child.closeStdin
      const echoed = yield* Fiber.join(reader)
      expect(echoed.toString("utf8")).toBe(lines.join(""))
    }).pipe(Effect.provide(host)))

  it.scopedLive("exit code and signal are typed", () =>
    Effect.gen(function*() {
      const exited = yield* ProcessHost.spawn({ command: "sh", args: ["-c", "echo oops >&2; exit 7"] })
      expect(yield* exited.await).toEqual({ code: 7, signal: null, stderrTail: "oops\n" })

      const signalled = yield* ProcessHost.spawn({ command: "sleep", args: ["1000"] })
      expect(yield* signalled.isRunning).toBe(true)
      yield* signalled.kill("SIGUSR1")
      expect(yield* signalled.await).toEqual({ code: null, signal: "SIGUSR1", stderrTail: "" })
      expect(yield* signalled.isRunning).toBe(false)
    }).pipe(Effect.provide(host)))

  it.scopedLive("the stderr tail is the last 8 KB, while stderr is also streamed in full", () =>
    Effect.gen(function*() {
      const script = `
        let out = ""
        for (let i = 0; i < 3000; i++) out += String(i).padStart(6, "0") + "\\n"
        process.stderr.write(out)
      `
      const child = yield* ProcessHost.spawn({ command: node, args: ["-e", script] })
      const streamed = yield* collect(child.stderr)
      const exit = yield* child.await
      let full = ""
      for (let i = 0; i < 3000; i++) full += String(i).padStart(6, "0") + "\n"
      expect(streamed.toString("utf8")).toBe(full)
      expect(exit.stderrTail).toBe(full.slice(full.length - 8192))
      expect(yield* child.stderrTail).toBe(exit.stderrTail)
    }).pipe(Effect.provide(host)))

  it.scopedLive("the stderr tail is kept when nobody reads the stream", () =>
    Effect.gen(function*() {
      const child = yield* ProcessHost.spawn({
        command: node,
        args: ["-e", "process.stderr.write('é'.repeat(10000))"]
      })
      const exit = yield* child.await
      // 8192 bytes of two-byte characters: the tail starts on a character boundary.
      expect(exit.stderrTail).toBe("é".repeat(4096))
    }).pipe(Effect.provide(host)))

  it.scopedLive("env is merged into process.env or replaces it", () =>
    Effect.gen(function*() {
      const print = "process.stdout.write(JSON.stringify(process.env))"
      const merged = yield* ProcessHost.spawn({
        command: node,
        args: ["-e", print],
        env: { SKEIN_TEST_VAR: "merged", HOME: undefined }
      })
      const mergedEnv = JSON.parse((yield* collect(merged.stdout)).toString("utf8"))
      expect(mergedEnv.SKEIN_TEST_VAR).toBe("merged")
      expect(mergedEnv.PATH).toBe(process.env.PATH)
      // An undefined value removes an inherited variable.
      expect("HOME" in mergedEnv).toBe(false)

      const replaced = yield* ProcessHost.spawn({
        command: node,
        args: ["-e", print],
        env: { SKEIN_TEST_VAR: "alone" },
        envMode: "replace"
      })
      const replacedEnv = JSON.parse((yield* collect(replaced.stdout)).toString("utf8"))
      // Only the caller's variables, plus the marker every child carries.
      expect(Object.keys(replacedEnv).sort()).toEqual(["SKEIN_PROCESS", "SKEIN_TEST_VAR"])
      expect(replacedEnv.SKEIN_TEST_VAR).toBe("alone")
      expect(replacedEnv.SKEIN_PROCESS.split(",")).toContain(replaced.marker)
    }).pipe(Effect.provide(host)))

  it.scopedLive("runs in the given cwd", () =>
    Effect.gen(function*() {
      const dir = NodeFs.realpathSync(tempDir())
      yield* Effect.addFinalizer(() => Effect.sync(() => NodeFs.rmSync(dir, { recursive: true, force: true })))
      const child = yield* ProcessHost.spawn({ command: "pwd", cwd: dir })
      expect((yield* collect(child.stdout)).toString("utf8")).toBe(`${dir}\n`)
    }).pipe(Effect.provide(host)))

  it.scopedLive("spawn failures are typed SpawnErrors", () =>
    Effect.gen(function*() {
      const missing = yield* Effect.flip(ProcessHost.spawn({ command: "/nonexistent/skein-binary", args: ["x"] }))
      expect(missing).toBeInstanceOf(ProcessHost.SpawnError)
      expect(missing.code).toBe("ENOENT")
      expect(missing.command).toBe("/nonexistent/skein-binary")
      expect(missing.args).toEqual(["x"])

      const dir = tempDir()
      yield* Effect.addFinalizer(() => Effect.sync(() => NodeFs.rmSync(dir, { recursive: true, force: true })))
      const file = NodePath.join(dir, "not-executable")
      NodeFs.writeFileSync(file, "#!/bin/sh\n", { mode: 0o644 })
      const denied = yield* Effect.flip(ProcessHost.spawn({ command: file }))
      // root may execute nothing without an x bit either: the kernel refuses.
      expect(denied.code).toBe("EACCES")
      expect(denied.reason).toContain("EACCES")
    }).pipe(Effect.provide(host)))

  it.scopedLive("writing after close, after exit, or into a broken pipe is StdinClosed", () =>
    Effect.gen(function*() {
      const closed = yield* ProcessHost.spawn({ command: "cat" })
      yield* closed.closeStdin
      yield* closed.closeStdin
      const afterClose = yield* Effect.flip(closed.write("late"))
      expect(afterClose).toBeInstanceOf(ProcessHost.StdinClosed)
      expect(afterClose.pid).toBe(closed.pid)

      const done = yield* ProcessHost.spawn({ command: "true" })
      yield* done.await
      expect((yield* Effect.flip(done.write("late")))._tag).toBe("StdinClosed")

      // The child closes its stdin and keeps running: writes hit EPIPE, which must not crash us.
      const deaf = yield* ProcessHost.spawn({ command: "sh", args: ["-c", "exec 0<&-; echo ready; exec sleep 1000"] })
      expect(yield* firstLine(deaf.stdout)).toBe("ready")
      const chunk = Buffer.alloc(64 * 1024, 1)
      const broken = yield* Effect.flip(Effect.forever(deaf.write(chunk)))
      expect(broken._tag).toBe("StdinClosed")
      expect(broken.reason).toContain("EPIPE")
    }).pipe(Effect.provide(host)))

  it.scoped("stop: a child that exits when stdin closes is not signalled", () =>
    Effect.gen(function*() {
      const child = yield* ProcessHost.spawn({ command: "cat" })
      expect(yield* child.stop).toEqual({ code: 0, signal: null, stderrTail: "" })
    }).pipe(Effect.provide(ProcessHost.layerMemory())))

  it.scoped("stop: SIGTERM after the stdin grace", () =>
    Effect.gen(function*() {
      const child = yield* ProcessHost.spawn({ command: "sleep", args: ["1000"] })
      const stopping = yield* Effect.fork(child.stop)
      yield* adjustWhenSleeping("2 seconds")
      const exit = yield* Fiber.join(stopping)
      expect(exit.signal).toBe("SIGTERM")
      expect(yield* waitGone([child.pid])).toBe(true)
    }).pipe(Effect.provide(ProcessHost.layerMemory())))

  it.scoped("stop: a child that ignores SIGTERM is SIGKILLed after the term grace", () =>
    Effect.gen(function*() {
      const child = yield* ProcessHost.spawn({
        command: "sh",
        args: ["-c", "trap '' TERM; echo ready; while :; do sleep 1; done"],
        stopTimeouts: { stdinGrace: "2 seconds", termGrace: "3 seconds" }
      })
      expect(yield* firstLine(child.stdout)).toBe("ready")
      const stopping = yield* Effect.fork(child.stop)
      yield* adjustWhenSleeping("2 seconds")
      // SIGTERM was sent; the stop now waits out the term grace.
      while ((yield* TestClock.sleeps()).length === 0) yield* realSleep(5)
      yield* realSleep(100)
      expect(isAlive(child.pid)).toBe(true)
      expect(Option.isNone(yield* Fiber.poll(stopping))).toBe(true)
      yield* TestClock.adjust("3 seconds")
      const exit = yield* Fiber.join(stopping)
      expect(exit).toEqual({ code: null, signal: "SIGKILL", stderrTail: "" })
      expect(yield* waitGone([child.pid])).toBe(true)
    }).pipe(Effect.provide(ProcessHost.layerMemory())))

  it.live("scope close after the leader exited 0 still kills its background grandchild", () =>
    Effect.gen(function*() {
      let grandchild = 0
      const outer = yield* Scope.make()
      yield* Effect.addFinalizer(() => Effect.sync(() => grandchild > 0 && isAlive(grandchild) && process.kill(grandchild, "SIGKILL")))
        .pipe(Effect.provideService(Scope.Scope, outer))
      const scope = yield* Scope.make()
      const child = yield* ProcessHost.spawn({ command: "sh", args: ["-c", "sleep 1000 & echo $!; exit 0"] }).pipe(
        Effect.provideService(Scope.Scope, scope)
      )
      grandchild = Number(yield* firstLine(child.stdout))
      expect(yield* child.await).toEqual({ code: 0, signal: null, stderrTail: "" })
      expect(grandchild).toBeGreaterThan(0)
      expect(isAlive(grandchild)).toBe(true)
      yield* Scope.close(scope, Exit.void)
      expect(yield* waitGone([grandchild])).toBe(true)
      yield* Scope.close(outer, Exit.void)
    }).pipe(Effect.provide(host)))

  it.live("interrupting the fiber that owns the scope stops the whole group", () =>
    Effect.gen(function*() {
      const pids = yield* Effect.makeLatch(false)
      let seen: Array<number> = []
      const owner = yield* Effect.fork(Effect.scoped(Effect.gen(function*() {
        yield* guard(() => seen)
        const child = yield* ProcessHost.spawn({
          command: "sh",
          args: ["-c", "sleep 1000 & echo $!; sleep 1000 & echo $!; exec sleep 1000"]
        })
        const lines = yield* child.stdout.pipe(Stream.decodeText(), Stream.splitLines, Stream.take(2), Stream.runCollect)
        seen = [child.pid, ...Chunk.toArray(lines).map(Number)]
        yield* pids.open
        return yield* Effect.never
      })))
      yield* pids.await
      expect(seen.every(isAlive)).toBe(true)
      yield* Fiber.interrupt(owner)
      expect(yield* waitGone(seen)).toBe(true)
    }).pipe(Effect.provide(host)))
})
