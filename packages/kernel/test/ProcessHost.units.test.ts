/**
 * ProcessHost's internal units alone, without a child process: the stderr
 * ring, the child's environment, the stop timeouts, and the stop escalation
 * under TestClock against an exit that a recorded signal brings about.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber, Option, TestClock } from "effect"
import type * as ProcessHost from "../src/ProcessHost.js"
import { ByteRing } from "../src/internal/byteRing.js"
import { buildEnv } from "../src/internal/childStart.js"
import * as ChildStop from "../src/internal/childStop.js"
import * as procfs from "../src/internal/procfs.js"

const encode = (text: string) => new TextEncoder().encode(text)

describe("ByteRing", () => {
  it("keeps the last `capacity` bytes, across pushes and from a push larger than it", () => {
    const ring = new ByteRing(4)
    ring.push(encode("ab"))
    expect(ring.text()).toBe("ab")
    ring.push(encode("cde"))
    expect(ring.text()).toBe("bcde")
    ring.push(encode("0123456789"))
    expect(ring.text()).toBe("6789")
  })

  it("is empty, and holds no buffer, until the first bytes", () => {
    const ring = new ByteRing(1 << 20)
    expect(ring.text()).toBe("")
    ring.push(new Uint8Array(0))
    expect([...ring.bytes()]).toEqual([])
    expect(Object.values(ring).some((v) => v instanceof Uint8Array)).toBe(false)
    ring.push(encode("x"))
    expect(ring.text()).toBe("x")
  })

  it("drops a character the cut at the front split", () => {
    const ring = new ByteRing(4)
    // "é" is two bytes (c3 a9): the cut keeps only its second one.
    ring.push(encode("aébcd"))
    expect([...ring.bytes()]).toEqual([0xa9, 0x62, 0x63, 0x64])
    expect(ring.text()).toBe("bcd")
  })
})

describe("procfs identity", () => {
  it("a child's identity keeps a digest of its command line, which matches the bytes and nothing else", () => {
    const cmdline = `node\0cli.js\0${"--flag\0".repeat(500)}`
    const snapshot = Option.getOrThrow(procfs.snapshotProc(process.pid, ["node"]))
    expect(snapshot.cmdline.startsWith("sha256:")).toBe(true)
    expect(snapshot.cmdline.length).toBeLessThan(60)
    const raw = { source: "proc", startTime: "42", cmdline } as const
    const digested = { ...raw, cmdline: procfs.digestCmdline(cmdline) }
    // A journal written before digests holds the bytes: either side may be either.
    expect(procfs.sameIdentity(raw, digested)).toBe(true)
    expect(procfs.sameIdentity(digested, raw)).toBe(true)
    expect(procfs.sameIdentity(digested, digested)).toBe(true)
    expect(procfs.sameIdentity(digested, { ...raw, cmdline: `${cmdline}x` })).toBe(false)
    expect(procfs.sameIdentity(digested, { ...digested, startTime: "43" })).toBe(false)
    expect(procfs.digestCmdline(digested.cmdline)).toBe(digested.cmdline)
  })
})

describe("childStart.buildEnv", () => {
  it("layers env over process.env; undefined removes; replace starts empty", () => {
    const merged = buildEnv({ command: "x", env: { SKEIN_UNIT_A: "1", PATH: undefined } })
    expect(merged.SKEIN_UNIT_A).toBe("1")
    // Shadowed by undefined, which spawn leaves out (see the child's environment below).
    expect(merged.PATH).toBeUndefined()
    expect(merged.HOME).toBe(process.env.HOME)
    expect(buildEnv({ command: "x", envMode: "replace", env: { ONLY: "this", GONE: undefined } })).toEqual({ ONLY: "this" })
  })
})

describe("childStop", () => {
  it("timeouts: the defaults, the host's, then the spawn's", () => {
    expect(ChildStop.resolveTimeouts()).toEqual({ stdinGrace: Duration.seconds(2), termGrace: Duration.seconds(3) })
    expect(ChildStop.resolveTimeouts({ termGrace: "1 second" }, undefined, { stdinGrace: 0 })).toEqual({
      stdinGrace: Duration.zero,
      termGrace: Duration.seconds(1)
    })
  })

  /** A stop whose leader exits on the first signal in `exitOn`; `events` records what the stop did. */
  const fixture = (exitOn: ReadonlyArray<NodeJS.Signals>, timeouts: ChildStop.Timeouts) =>
    Effect.gen(function*() {
      const exited = yield* Deferred.make<ProcessHost.ExitStatus>()
      const events: Array<string> = []
      const kill = (signal: NodeJS.Signals) =>
        Effect.sync(() => events.push(signal)).pipe(
          Effect.zipRight(
            exitOn.includes(signal) ? Deferred.succeed(exited, { code: null, signal, stderrTail: "" }) : Effect.void
          )
        )
      const closeStdin = Effect.sync(() => {
        events.push("close stdin")
      })
      return { events, exited, stop: ChildStop.makeStop({ pid: 1, exited, closeStdin, kill, timeouts }) }
    })

  const timeouts = { stdinGrace: Duration.seconds(2), termGrace: Duration.seconds(3) }

  it.effect("stop closes stdin, SIGTERMs after stdinGrace, SIGKILLs after termGrace", () =>
    Effect.gen(function*() {
      const { events, stop } = yield* fixture(["SIGKILL"], timeouts)
      const fiber = yield* Effect.fork(stop)
      yield* TestClock.adjust("1999 millis")
      expect(events).toEqual(["close stdin"])
      yield* TestClock.adjust("1 millis")
      expect(events).toEqual(["close stdin", "SIGTERM"])
      yield* TestClock.adjust("2999 millis")
      expect(fiber.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 millis")
      expect((yield* Fiber.join(fiber)).signal).toBe("SIGKILL")
      expect(events).toEqual(["close stdin", "SIGTERM", "SIGKILL"])
    }))

  it.effect("a leader that exits at stdin's end gets no signal; one that heeds SIGTERM gets no SIGKILL", () =>
    Effect.gen(function*() {
      const polite = yield* fixture([], timeouts)
      const fiber = yield* Effect.fork(polite.stop)
      yield* TestClock.adjust("1 second")
      yield* Deferred.succeed(polite.exited, { code: 0, signal: null, stderrTail: "" })
      expect((yield* Fiber.join(fiber)).code).toBe(0)
      expect(polite.events).toEqual(["close stdin"])

      const heeds = yield* fixture(["SIGTERM"], timeouts)
      const second = yield* Effect.fork(heeds.stop)
      yield* TestClock.adjust("2 seconds")
      expect((yield* Fiber.join(second)).signal).toBe("SIGTERM")
      expect(heeds.events).toEqual(["close stdin", "SIGTERM"])
    }))

  it.effect("zero graces do not wait: each step only looks whether the leader exited, and stdin closes after the signals", () =>
    Effect.gen(function*() {
      const { events, stop } = yield* fixture(["SIGKILL"], { stdinGrace: Duration.zero, termGrace: Duration.zero })
      expect((yield* stop).signal).toBe("SIGKILL")
      expect(events).toEqual(["SIGTERM", "SIGKILL", "close stdin"])
    }))

  it.effect("with no stdin grace, SIGTERM comes first and stdin closes within the term grace", () =>
    Effect.gen(function*() {
      const { events, stop } = yield* fixture(["SIGKILL"], { stdinGrace: Duration.zero, termGrace: Duration.seconds(3) })
      const fiber = yield* Effect.fork(stop)
      yield* TestClock.adjust("1 millis")
      expect(events).toEqual(["SIGTERM", "close stdin"])
      yield* TestClock.adjust("3 seconds")
      expect((yield* Fiber.join(fiber)).signal).toBe("SIGKILL")
      expect(events).toEqual(["SIGTERM", "close stdin", "SIGKILL"])
    }))

  it.effect("with no graces, a leader that heeds SIGTERM still has its stdin closed", () =>
    Effect.gen(function*() {
      const { events, stop } = yield* fixture(["SIGTERM"], { stdinGrace: Duration.zero, termGrace: Duration.zero })
      expect((yield* stop).signal).toBe("SIGTERM")
      expect(events).toEqual(["SIGTERM", "close stdin"])
    }))
})
