/**
 * A supervisor owns keyed children, each an Effect run under a restart policy.
 *
 * - Each incarnation of a child runs in its own fiber and its own Scope; a
 *   restart starts the next one only after the previous fiber and all its
 *   finalizers are done. Starting a key that is already running stops (and
 *   awaits) the old child first: `FiberMap.run` alone would not wait.
 * - When a child's policy gives up, the supervisor escalates: it stops every
 *   child and its own fiber fails with `Escalated { key, cause }`. Run as a
 *   child of another supervisor (`Supervisor.run`), that is a child failure
 *   there, handled by the parent's policy.
 * - Interrupting a supervisor interrupts its whole subtree. Children are
 *   stopped before anything else the supervisor's owner holds, so finalizers
 *   run child-first; `stop` and scope close return after all of them ran.
 */
import type { Queue, Scope, Subscribable } from "effect"
import {
  Cause,
  Clock,
  Context,
  Data,
  Deferred,
  Duration,
  Effect,
  Exit,
  Fiber,
  FiberMap,
  Layer,
  Option,
  PubSub,
  Schedule,
  SubscriptionRef
} from "effect"

/** A child's policy gave up; `cause` is the child's last failure (empty if it kept succeeding under `always`). */
export class Escalated extends Data.TaggedError("Escalated")<{
  readonly key: string
  readonly cause: Cause.Cause<unknown>
}> {}

/** The supervisor has escalated or shut down and takes no new children. */
export class SupervisorClosed extends Data.TaggedError("SupervisorClosed")<{
  readonly key: string
}> {}

/**
 * When a child is restarted, and how often. `schedule` is stepped once per
 * restart with the exit that caused it; when it is done, the supervisor escalates.
 */
export interface RestartPolicy {
  readonly restartOn: "never" | "always" | "failure"
  readonly schedule: Schedule.Schedule<unknown, Exit.Exit<unknown, unknown>>
  /** An incarnation that ran at least this long resets the schedule (fresh backoff and count). */
  readonly resetAfter: Option.Option<Duration.Duration>
}

export interface BackoffOptions {
  /** First delay. Default 100 millis. */
  readonly base?: Duration.DurationInput | undefined
  /** Default 2. */
  readonly factor?: number | undefined
  /** Cap on a single delay. Default 30 seconds. */
  readonly maxDelay?: Duration.DurationInput | undefined
  /** Restarts allowed before escalating. Default 10; `Infinity` never escalates. */
  readonly maxRestarts?: number | undefined
  readonly resetAfter?: Duration.DurationInput | undefined
}

const backoff = (options: BackoffOptions | undefined): Schedule.Schedule<unknown, Exit.Exit<unknown, unknown>> => {
  const exponential = Schedule.exponential(options?.base ?? Duration.millis(100), options?.factor ?? 2).pipe(
    // union: the smaller of the two delays, so no delay exceeds maxDelay.
    Schedule.union(Schedule.spaced(options?.maxDelay ?? Duration.seconds(30)))
  )
  const maxRestarts = options?.maxRestarts ?? 10
  return Number.isFinite(maxRestarts)
    ? Schedule.intersect(exponential, Schedule.recurs(maxRestarts))
    : exponential
}

const resetAfter = (options: BackoffOptions | undefined) =>
  Option.map(Option.fromNullable(options?.resetAfter), Duration.decode)

/** Run once; a failure is recorded (ChildExited) and not escalated. */
export const never: RestartPolicy = {
  restartOn: "never",
  schedule: Schedule.stop,
  resetAfter: Option.none()
}

/** Restart after any end, success or failure, with exponential backoff. */
export const always = (options?: BackoffOptions): RestartPolicy => ({
  restartOn: "always",
  schedule: backoff(options),
  resetAfter: resetAfter(options)
})

/** Restart after a failure (not after success or interruption), with exponential backoff. */
export const onFailure = (options?: BackoffOptions): RestartPolicy => ({
  restartOn: "failure",
  schedule: backoff(options),
  resetAfter: resetAfter(options)
})

/** Any Schedule as the restart budget and delays. */
export const fromSchedule = (
  restartOn: "always" | "failure",
  schedule: Schedule.Schedule<unknown, Exit.Exit<unknown, unknown>>,
  options?: { readonly resetAfter?: Duration.DurationInput | undefined }
): RestartPolicy => ({ restartOn, schedule, resetAfter: Option.map(Option.fromNullable(options?.resetAfter), Duration.decode) })

export interface ChildInfo {
  readonly key: string
  /** `restarting` while the backoff delay runs. */
  readonly status: "running" | "restarting"
  /** Restarts so far (0 for the first incarnation). */
  readonly restarts: number
}

export type Event = Data.TaggedEnum<{
  /** An incarnation started; `restarts` is 0 for the first. */
  ChildStarted: { readonly key: string; readonly restarts: number }
  /** An incarnation ended (interrupted by `stop` or shutdown included). */
  ChildExited: { readonly key: string; readonly exit: Exit.Exit<unknown, unknown> }
  /** The child's policy gave up; the supervisor escalates. */
  ChildEscalated: { readonly key: string; readonly cause: Cause.Cause<unknown> }
}>
export const Event = Data.taggedEnum<Event>()

export class Supervisor extends Context.Tag("@skein/kernel/Supervisor")<Supervisor, {
  /**
   * Starts `effect` as child `key` under `policy`. Each incarnation gets its
   * own Scope. If `key` is running, that child is stopped first (and awaited).
   * Must not be called by a child to replace itself.
   */
  readonly start: <A, E, R>(
    key: string,
    effect: Effect.Effect<A, E, R>,
    policy: RestartPolicy
  ) => Effect.Effect<void, SupervisorClosed, Exclude<R, Scope.Scope>>
  /** Interrupts child `key` and returns after its finalizers ran. No-op for an unknown key. */
  readonly stop: (key: string) => Effect.Effect<void>
  readonly children: Subscribable.Subscribable<ReadonlyMap<string, ChildInfo>>
  /** Events from the moment of subscription on. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<Event>, never, Scope.Scope>
  /** The supervisor's own fiber: fails with `Escalated` when a child's policy gives up; never succeeds. */
  readonly join: Effect.Effect<never, Escalated>
  /** Stops every child (awaiting their finalizers) and refuses new ones. Idempotent. */
  readonly shutdown: Effect.Effect<void>
}>() {}

/**
 * A supervisor in the current Scope. Closing the Scope interrupts every child
 * and waits for their finalizers. Resources acquired in the same Scope after
 * `make` are released before the children stop (scopes unwind in reverse);
 * `run` avoids that.
 */
export const make: Effect.Effect<Context.Tag.Service<Supervisor>, never, Scope.Scope> = Effect.gen(function*() {
  const fibers = yield* FiberMap.make<string, void, Escalated>()
  const childrenRef = yield* SubscriptionRef.make<ReadonlyMap<string, ChildInfo>>(new Map())
  const events = yield* PubSub.unbounded<Event>()
  const escalation = yield* Deferred.make<never, Escalated>()
  // Serializes start/stop/shutdown so that a key never has two live children.
  const lock = yield* Effect.makeSemaphore(1)
  let closed = false

  const setChild = (info: ChildInfo) =>
    SubscriptionRef.update(childrenRef, (map) => new Map(map).set(info.key, info))
  const removeChild = (key: string) =>
    SubscriptionRef.update(childrenRef, (map) => {
      const next = new Map(map)
      next.delete(key)
      return next
    })

  const supervise = <A, E, R>(key: string, effect: Effect.Effect<A, E, R>, policy: RestartPolicy) =>
    Effect.gen(function*() {
      const driver = yield* Schedule.driver(policy.schedule)
      let restarts = 0
      while (true) {
        const startedAt = yield* Clock.currentTimeMillis
        yield* setChild({ key, status: "running", restarts })
        yield* PubSub.publish(events, Event.ChildStarted({ key, restarts }))
        // Own fiber and Scope per incarnation: when it is over, so is all it forked and held.
        const fiber: Fiber.RuntimeFiber<A, E> = yield* Effect.fork(Effect.scoped(effect))
        const exit = yield* Fiber.await(fiber).pipe(
          Effect.onInterrupt(() =>
            Effect.flatMap(Fiber.interrupt(fiber), (exit) => PubSub.publish(events, Event.ChildExited({ key, exit })))
          )
        )
        yield* PubSub.publish(events, Event.ChildExited({ key, exit }))
        if (Exit.isSuccess(exit) ? policy.restartOn !== "always" : policy.restartOn === "never") return
        // Interrupted from inside (not by us: that would have ended this loop): a stop.
        if (Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)) return
        const ranFor = (yield* Clock.currentTimeMillis) - startedAt
        if (Option.isSome(policy.resetAfter) && ranFor >= Duration.toMillis(policy.resetAfter.value)) {
          yield* driver.reset
        }
        yield* setChild({ key, status: "restarting", restarts })
        // Sleeps the backoff delay (on the Clock, so TestClock drives it); fails when the policy gives up.
        const next = yield* Effect.option(driver.next(exit))
        if (Option.isNone(next)) {
          const cause = Exit.isFailure(exit) ? exit.cause : Cause.empty
          yield* PubSub.publish(events, Event.ChildEscalated({ key, cause }))
          const escalated = new Escalated({ key, cause })
          yield* Deferred.fail(escalation, escalated)
          return yield* Effect.fail(escalated)
        }
        restarts += 1
      }
    }).pipe(
      Effect.ensuring(removeChild(key)),
      Effect.withSpan("Supervisor.child", { attributes: { key } })
    )

  // Children are interrupted together, then all awaited: siblings stop in parallel.
  const shutdown = lock.withPermits(1)(
    Effect.suspend(() => {
      closed = true
      return Fiber.interruptAll(Array.from(fibers, ([, fiber]) => fiber))
    })
  )

  const start = <A, E, R>(
    key: string,
    effect: Effect.Effect<A, E, R>,
    policy: RestartPolicy
  ): Effect.Effect<void, SupervisorClosed, Exclude<R, Scope.Scope>> =>
    lock.withPermits(1)(
      Effect.suspend(() => {
        if (closed) return Effect.fail(new SupervisorClosed({ key }))
        return FiberMap.remove(fibers, key).pipe(
          Effect.zipRight(FiberMap.run(fibers, key, supervise(key, effect, policy))),
          Effect.asVoid
        )
      })
    ).pipe(Effect.withSpan("Supervisor.start", { attributes: { key } }))

  const stop = (key: string): Effect.Effect<void> =>
    lock.withPermits(1)(FiberMap.remove(fibers, key)).pipe(
      Effect.withSpan("Supervisor.stop", { attributes: { key } })
    )

  // Runs first on scope close: from then on `start` fails instead of being interrupted.
  yield* Effect.addFinalizer(() => Effect.sync(() => {
    closed = true
  }))

  // The supervisor's own fiber: on escalation it stops every child, then fails.
  const own = yield* Deferred.await(escalation).pipe(
    Effect.onError(() => shutdown),
    Effect.forkScoped
  )

  return Supervisor.of({
    start,
    stop,
    children: childrenRef,
    subscribe: PubSub.subscribe(events),
    join: Fiber.join(own),
    shutdown
  })
})

export const layer: Layer.Layer<Supervisor> = Layer.scoped(Supervisor, make)

/**
 * Runs a supervisor as an Effect, typically a child of another supervisor:
 * `setup` starts the children, then this fails with `Escalated` when one of
 * them escalates (or with `setup`'s error), and never succeeds. On any end,
 * interruption included, the children stop before `setup`'s own resources
 * are released.
 */
export const run = <A, E, R>(
  setup: (supervisor: Context.Tag.Service<Supervisor>) => Effect.Effect<A, E, R>
): Effect.Effect<never, E | Escalated, Exclude<R, Scope.Scope>> =>
  Effect.scoped(
    Effect.flatMap(make, (supervisor) =>
      setup(supervisor).pipe(
        Effect.zipRight(supervisor.join),
        Effect.ensuring(supervisor.shutdown)
      ))
  )
