/**
 * The control channel alone, over an in-memory "stdin": correlation, errors,
 * timeouts, and withdrawal whenever the caller stops waiting.
 */
import { describe, expect, it } from "@effect/vitest"
import { ProcessHost } from "@skein/kernel"
import type { HostMessage } from "@skein/protocol"
import { Deferred, Effect, Fiber, Option, Ref, TestClock } from "effect"
import * as ControlChannel from "../../src/internal/controlChannel.js"
import { CliExited, SessionClosed, type TurnError } from "../../src/SessionError.js"

/** A channel whose writes land in `written`; `closed` makes every write fail as a dead pipe would. */
const setup = Effect.gen(function*() {
  const written = yield* Ref.make<ReadonlyArray<HostMessage.HostMessage>>([])
  const closed = yield* Ref.make(false)
  const ended = yield* Ref.make(Option.none<TurnError>())
  const channel = ControlChannel.make({
    write: (message) =>
      Effect.flatMap(Ref.get(closed), (isClosed) =>
        isClosed
          ? Effect.fail(new ProcessHost.StdinClosed({ pid: 1, reason: "stdin closed" }))
          : Ref.update(written, (all) => [...all, message])),
    closedError: Effect.succeed(new CliExited({ code: 1, signal: null, stderrTail: "boom" })),
    ended: Ref.get(ended),
    scope: yield* Effect.scope
  })
  const requestIds = Effect.map(
    Ref.get(written),
    (all) => all.flatMap((m) => m.type === "control_request" ? [m.request_id] : [])
  )
  const cancels = Effect.map(
    Ref.get(written),
    (all) => all.flatMap((m) => m.type === "control_cancel_request" ? [m.request_id] : [])
  )
  return { channel, written, closed, ended, requestIds, cancels }
})

describe("controlChannel", () => {
  it.scoped("answers go to their own request, by id; an error answer is a ControlError", () =>
    Effect.gen(function*() {
      const { channel, requestIds } = yield* setup
      const a = yield* Effect.fork(channel.request({ subtype: "mcp_status" }))
      const b = yield* Effect.fork(channel.request({ subtype: "get_context_usage" }))
      yield* Effect.yieldNow()
      const [idA, idB] = yield* requestIds
      yield* channel.onResponse({ type: "control_response", response: { subtype: "error", request_id: idB!, error: "nope" } })
      yield* channel.onResponse({ type: "control_response", response: { subtype: "success", request_id: idA!, response: { ok: 1 } } })
      expect(yield* Fiber.join(a)).toEqual({ ok: 1 })
      expect(yield* Effect.flip(Fiber.join(b))).toMatchObject({ _tag: "ControlError", subtype: "get_context_usage", error: "nope" })
      expect(yield* channel.pending).toBe(0)
    }))

  it.scoped("a timeout withdraws the request with control_cancel_request", () =>
    Effect.gen(function*() {
      const { cancels, channel, requestIds } = yield* setup
      const waiting = yield* Effect.fork(channel.request({ subtype: "mcp_status" }, { timeout: "1 second" }))
      yield* TestClock.adjust("1 second")
      expect(yield* Effect.flip(Fiber.join(waiting))).toMatchObject({ _tag: "ControlTimeout", timeoutMillis: 1000 })
      yield* Effect.yieldNow()
      expect(yield* cancels).toEqual(yield* requestIds)
      expect(yield* channel.pending).toBe(0)
    }))

  it.scoped("failure 7: an interrupted caller withdraws its request too", () =>
    Effect.gen(function*() {
      const { cancels, channel, requestIds } = yield* setup
      const waiting = yield* Effect.fork(channel.request({ subtype: "mcp_status" }))
      yield* Effect.yieldNow()
      expect(yield* channel.pending).toBe(1)
      yield* Fiber.interrupt(waiting)
      yield* Effect.yieldNow()
      expect(yield* channel.pending).toBe(0)
      expect(yield* cancels).toEqual(yield* requestIds)
      // A late answer to a withdrawn request is dropped.
      const [id] = yield* requestIds
      yield* channel.onResponse({ type: "control_response", response: { subtype: "success", request_id: id!, response: {} } })
    }))

  it.scoped("a wait inside a finalizer can still be cut short by a timeout around it", () =>
    Effect.gen(function*() {
      const { channel } = yield* setup
      const done = yield* Deferred.make<string>()
      yield* Effect.scoped(Effect.addFinalizer(() =>
        channel.request({ subtype: "interrupt" }).pipe(
          Effect.timeout("1 second"),
          Effect.either,
          Effect.flatMap((outcome) => Deferred.succeed(done, outcome._tag))
        )
      )).pipe(Effect.fork)
      yield* TestClock.adjust("1 second")
      expect(yield* Deferred.await(done)).toBe("Left")
    }))

  it.scoped("a write to a closed stdin fails the wait with why the session ended; after the end nothing is written", () =>
    Effect.gen(function*() {
      const { channel, closed, ended, written } = yield* setup
      yield* Ref.set(closed, true)
      expect(yield* Effect.flip(channel.request({ subtype: "mcp_status" }))).toMatchObject({ _tag: "CliExited", code: 1 })
      yield* Ref.set(ended, Option.some(new SessionClosed()))
      expect((yield* Effect.flip(channel.request({ subtype: "mcp_status" })))._tag).toBe("SessionClosed")
      expect(yield* Ref.get(written)).toEqual([])
    }))

  it.scoped("failAll fails every pending request with the session's end", () =>
    Effect.gen(function*() {
      const { channel } = yield* setup
      const first = yield* Effect.fork(channel.request({ subtype: "mcp_status" }))
      const second = yield* Effect.fork(channel.request({ subtype: "get_context_usage" }))
      yield* Effect.yieldNow().pipe(Effect.repeatN(3))
      expect(yield* channel.pending).toBe(2)
      yield* channel.failAll(new CliExited({ code: null, signal: "SIGKILL", stderrTail: "" }))
      for (const waiting of [first, second]) {
        expect(yield* Effect.flip(Fiber.join(waiting))).toMatchObject({ _tag: "CliExited", signal: "SIGKILL" })
      }
      expect(yield* channel.pending).toBe(0)
    }))
})
