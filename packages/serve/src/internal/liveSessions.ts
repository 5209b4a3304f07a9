/**
 * The registry's running sessions, keyed by their served id: an `RcMap`
 * whose entries are started on first use and stay until they are retired
 * (stopped, idle for the timeout, or their CLI exited by itself).
 *
 * The start runs in the entry's own fiber and scope, not in the caller's: a
 * prompt interrupted while its session starts (a client that disconnects
 * while a large transcript loads) leaves the start to finish, and the next
 * prompt finds the session running. A start that fails is forgotten, so the
 * next prompt tries again.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as RcMap from "effect/RcMap"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import type { SessionFailed } from "../ServeError.js"
import { idleFor } from "./idle.js"
import type * as LiveSession from "./liveSession.js"

/** A running session and what its idle timer counts. */
interface Running {
  readonly live: LiveSession.LiveSession
  /** Prompts sent to it: the idle timer stops it only when each has reached its turn's end. */
  readonly prompts: SubscriptionRef.SubscriptionRef<number>
  retired: boolean
}

export interface LiveSessions {
  /** The session, started (or resumed) when it does not run; counts as a prompt for the idle timer. */
  readonly acquire: (sessionID: string) => Effect.Effect<LiveSession.LiveSession, SessionFailed>
  /** The session if it runs now; none while it starts. */
  readonly peek: (sessionID: string) => Effect.Effect<Option.Option<LiveSession.LiveSession>>
  /** The session once a start under way ends; none when it neither runs nor starts. */
  readonly settled: (sessionID: string) => Effect.Effect<Option.Option<LiveSession.LiveSession>>
  /** The sessions running now. */
  readonly running: Effect.Effect<ReadonlyArray<readonly [string, LiveSession.LiveSession]>>
  /** Stops the session (a start under way included); its transcript stays. */
  readonly stop: (sessionID: string) => Effect.Effect<void>
}

export interface Options {
  /** Starts the session in the current scope, which closes when the session is retired. */
  readonly start: (sessionID: string) => Effect.Effect<LiveSession.LiveSession, SessionFailed, Scope.Scope>
  /** A session with no turn running or queued for this long is stopped; infinite keeps it. */
  readonly idleTimeout: Duration.Duration
}

export const make = Effect.fn("LiveSessions.make")(function*(options: Options) {
  const outer = yield* Effect.scope
  // Guards retiring against a prompt being counted: an idle stop never takes a session a prompt has just claimed.
  const lock = yield* Effect.makeSemaphore(1)
  // The entries that finished starting; each entry's scope removes its own.
  const ready = new Map<string, Running>()

  /** Retires `running` if it is still the session's entry; run from outside the entry's scope, which it closes. */
  const retire = (sessionID: string, running: Running, when: Effect.Effect<boolean> = Effect.succeed(true)): Effect.Effect<boolean> =>
    lock.withPermits(1)(Effect.gen(function*() {
      if (running.retired || ready.get(sessionID) !== running || !(yield* when)) return false
      running.retired = true
      yield* RcMap.invalidate(sessions, sessionID)
      return true
    }))

  /** Stops the session once it has been idle for the timeout, unless a prompt reached it meanwhile. */
  const watchIdle = (sessionID: string, running: Running) =>
    idleFor({
      busy: running.live.busy,
      ended: Stream.map(running.live.ended.changes, (e) => e.count),
      prompts: running.prompts
    }, options.idleTimeout).pipe(
      Effect.flatMap((seen) =>
        Effect.forkIn(retire(sessionID, running, Effect.map(SubscriptionRef.get(running.prompts), (n) => n === seen)), outer)
      ),
      Effect.flatMap(Fiber.join),
      Effect.repeat({ until: (stopped) => stopped })
    )

  const lookup = (sessionID: string) =>
    Effect.gen(function*() {
      const live = yield* options.start(sessionID)
      const running: Running = { live, prompts: yield* SubscriptionRef.make(0), retired: false }
      yield* Effect.acquireRelease(
        Effect.sync(() => ready.set(sessionID, running)),
        () => Effect.sync(() => ready.get(sessionID) === running && ready.delete(sessionID))
      )
      // The CLI exited by itself, or the session's pump stopped it: the next prompt starts it again.
      yield* live.done.pipe(Effect.zipRight(Effect.forkIn(retire(sessionID, running), outer)), Effect.forkScoped)
      if (Duration.isFinite(options.idleTimeout)) yield* Effect.forkScoped(watchIdle(sessionID, running))
      return running
    })

  const sessions = yield* RcMap.make({ lookup, idleTimeToLive: Duration.infinity })

  /** The entry, awaiting its start; a failed start is forgotten. The reference is released at once: retiring closes it. */
  const get = (sessionID: string) =>
    Effect.scoped(RcMap.get(sessions, sessionID)).pipe(
      Effect.tapError(() =>
        lock.withPermits(1)(Effect.suspend(() => ready.has(sessionID) ? Effect.void : RcMap.invalidate(sessions, sessionID)))
      )
    )

  /** Counts a prompt on the entry, unless it was retired since it was got. */
  const claim = (sessionID: string, running: Running) =>
    lock.withPermits(1)(Effect.suspend(() =>
      running.retired || ready.get(sessionID) !== running
        ? Effect.succeed(false)
        : Effect.as(SubscriptionRef.update(running.prompts, (n) => n + 1), true)
    ))

  const acquire = (sessionID: string): Effect.Effect<LiveSession.LiveSession, SessionFailed> =>
    Effect.flatMap(get(sessionID), (running) =>
      Effect.flatMap(claim(sessionID, running), (claimed) => claimed ? Effect.succeed(running.live) : acquire(sessionID)))

  const peek = (sessionID: string) =>
    Effect.sync(() => Option.map(Option.fromNullable(ready.get(sessionID)), (r) => r.live))

  return {
    acquire,
    peek,
    settled: (sessionID) =>
      Effect.flatMap(RcMap.has(sessions, sessionID), (has) =>
        has ? Effect.map(Effect.option(get(sessionID)), Option.map((r) => r.live)) : peek(sessionID)),
    running: Effect.sync(() => [...ready.entries()].map(([id, r]) => [id, r.live] as const)),
    stop: (sessionID) =>
      lock.withPermits(1)(Effect.suspend(() => {
        const running = ready.get(sessionID)
        if (running !== undefined) running.retired = true
        return RcMap.invalidate(sessions, sessionID)
      }))
  } satisfies LiveSessions
})
