/**
 * A supervisor owns keyed children, each an Effect run under a restart policy.
 *
 * - Each incarnation of a child runs in its own fiber and its own Scope; a
 *   restart starts the next one only after the previous fiber and all its
 *   finalizers are done. Starting a key that is already running stops (and
 *   awaits) the old child first: `FiberMap.run` alone would not wait.
 * - Restarts are bounded in time, as OTP supervisors bound them: at most N
 *   within a period T, with a backoff that starts over after a healthy
 *   incarnation (one that ran long enough, or said so through `Incarnation`).
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
  Ref,
  Schedule,
  ScheduleDecision,
  ScheduleIntervals,
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
 * When a child is restarted, and how often.
 *
 * - `schedule` is stepped once per restart with the exit that caused it and
 *   gives the delay; when it is done, the supervisor escalates.
 * - `intensity` bounds restarts in time, as OTP's intensity and period do: at
 *   most `maxRestarts` within any `period`; one more escalates. A child that
 *   fails now and then runs forever; one that fails in a tight loop does not.
 * - A healthy incarnation resets the schedule (fresh backoff, and a fresh
 *   count for a budget kept in the schedule): one that ran `resetAfter`, or
 *   that said so through its `Incarnation`.
 */
export interface RestartPolicy {
  readonly restartOn: "never" | "always" | "failure"
  readonly schedule: Schedule.Schedule<unknown, Exit.Exit<unknown, unknown>>
  /** An incarnation that ran at least this long was healthy. */
  readonly resetAfter: Option.Option<Duration.Duration>
  readonly intensity: Option.Option<Intensity>
}

/** At most `maxRestarts` restarts within any `period`. */
export interface Intensity {
  readonly maxRestarts: number
  readonly period: Duration.Duration
}

export interface BackoffOptions {
  /** First delay. Default 100 millis. */
  readonly base?: Duration.DurationInput | undefined
  /** Default 2. */
  readonly factor?: number | undefined
  /** Cap on a single delay. Default 30 seconds. */
  readonly maxDelay?: Duration.DurationInput | undefined
  /**
   * Restarts allowed before escalating: within any `period` when one is
   * given, else since the last healthy incarnation. Default 10; `Infinity`
   * never escalates.
   */
  readonly maxRestarts?: number | undefined
  /** Makes `maxRestarts` an intensity: restarts counted in a sliding window of this length (e.g. 5 in 60 s). */
  readonly period?: Duration.DurationInput | undefined
  /** An incarnation that ran this long was healthy: the next delay is `base` again. */
  readonly resetAfter?: Duration.DurationInput | undefined
}

const backoff = (options: BackoffOptions | undefined): Schedule.Schedule<unknown, Exit.Exit<unknown, unknown>> => {
  const exponential = Schedule.exponential(options?.base ?? Duration.millis(100), options?.factor ?? 2).pipe(
    // union: the smaller of the two delays, so no delay exceeds maxDelay.
    Schedule.union(Schedule.spaced(options?.maxDelay ?? Duration.seconds(30)))
  )
  const maxRestarts = options?.maxRestarts ?? 10
  // With a period, the budget is the intensity window, which a healthy run does not refill.
  return Number.isFinite(maxRestarts) && options?.period === undefined
    ? Schedule.intersect(exponential, Schedule.recurs(maxRestarts))
    : exponential
}

const decodeOption = (duration: Duration.DurationInput | undefined) =>
  Option.map(Option.fromNullable(duration), Duration.decode)

const intensityOf = (options: BackoffOptions | undefined): Option.Option<Intensity> =>
  Option.map(decodeOption(options?.period), (period) => ({ maxRestarts: options?.maxRestarts ?? 10, period }))

/** Run once; a failure is recorded (ChildExited) and not escalated. */
export const never: RestartPolicy = {
  restartOn: "never",
  schedule: Schedule.stop,
  resetAfter: Option.none(),
  intensity: Option.none()
}

/** Restart after any end, success or failure, with exponential backoff. */
export const always = (options?: BackoffOptions): RestartPolicy => ({
  restartOn: "always",
  schedule: backoff(options),
  resetAfter: decodeOption(options?.resetAfter),
  intensity: intensityOf(options)
})

/** Restart after a failure (not after success or interruption), with exponential backoff. */
export const onFailure = (options?: BackoffOptions): RestartPolicy => ({
  restartOn: "failure",
  schedule: backoff(options),
  resetAfter: decodeOption(options?.resetAfter),
  intensity: intensityOf(options)
})

/** Any Schedule as the restart budget and delays. */
export const fromSchedule = (
  restartOn: "always" | "failure",
  schedule: Schedule.Schedule<unknown, Exit.Exit<unknown, unknown>>,
  options?: {
    readonly resetAfter?: Duration.DurationInput | undefined
    readonly intensity?: { readonly maxRestarts: number; readonly period: Duration.DurationInput } | undefined
  }
): RestartPolicy => ({
  restartOn,
  schedule,
  resetAfter: decodeOption(options?.resetAfter),
  intensity: Option.map(Option.fromNullable(options?.intensity), (i) => ({
    maxRestarts: i.maxRestarts,
    period: Duration.decode(i.period)
  }))
})

/**
 * `policy`, except that a failure for which `fatal` holds escalates at once,
 * with that failure as the cause, instead of being restarted: for failures a
 * retry cannot fix (a missing executable, a bad argument). The check is part
 * of the schedule, so it applies wherever `policy` would restart.
 */
export const escalateWhen = (policy: RestartPolicy, fatal: (error: unknown) => boolean): RestartPolicy => ({
  ...policy,
  schedule: Schedule.whileInput(
    policy.schedule,
    (exit: Exit.Exit<unknown, unknown>) => !(Exit.isFailure(exit) && Option.exists(Cause.failureOption(exit.cause), fatal))
  )
})

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
  /** A restart is due: incarnation `restarts` starts after `delay`. */
  ChildRestarting: { readonly key: string; readonly restarts: number; readonly delay: Duration.Duration }
  /** The child's policy gave up; the supervisor escalates. */
  ChildEscalated: { readonly key: string; readonly cause: Cause.Cause<unknown> }
  /** The child is gone for good (no restart due, stopped, or escalated): the last event of a key. */
  ChildRemoved: { readonly key: string }
}>
export const Event = Data.taggedEnum<Event>()

/**
 * What one incarnation of a child may tell its supervisor, provided to it
 * like its Scope. Only the child knows when it has proven itself (a session
 * that completed a turn, a server that answered a request), and only that
 * incarnation may vouch for itself: a handle in its own context cannot reach
 * a later incarnation, and the child need know neither its key nor its
 * supervisor. Children that never ask for it are unaffected.
 */
export class Incarnation extends Context.Tag("@skein/kernel/Incarnation")<Incarnation, {
  readonly key: string
  /** Restarts before this incarnation: 0 for the first. */
  readonly restarts: number
  /**
   * This incarnation is healthy: when it ends, the next restart starts the
   * schedule afresh (the delay is `base` again), as after `resetAfter`. The
   * intensity window still counts the restart. Idempotent.
   */
  readonly healthy: Effect.Effect<void>
}>() {}

export class Supervisor extends Context.Tag("@skein/kernel/Supervisor")<Supervisor, {
  /**
   * Starts `effect` as child `key` under `policy`. Each incarnation gets its
   * own Scope and `Incarnation`. If `key` is running, that child is stopped
   * first (and awaited). Must not be called by a child to replace itself.
   */
  readonly start: <A, E, R>(
    key: string,
    effect: Effect.Effect<A, E, R>,
    policy: RestartPolicy
  ) => Effect.Effect<void, SupervisorClosed, Exclude<Exclude<R, Scope.Scope>, Incarnation>>
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
 * Whether `exit` calls for a restart. An interruption from inside (not by the
 * supervisor: that ends supervision) is a stop.
 */
const restartDue = (policy: RestartPolicy, exit: Exit.Exit<unknown, unknown>): boolean =>
  Exit.isSuccess(exit)
    ? policy.restartOn === "always"
    : policy.restartOn !== "never" && !Cause.isInterruptedOnly(exit.cause)

/**
 * The restart bookkeeping of one child: the policy's schedule, stepped by
 * hand (as `Schedule.driver` does) so that the delay is known, and announced,
 * before it is slept; and the times of recent restarts, for the intensity.
 */
const restartBudget = (policy: RestartPolicy) =>
  Effect.gen(function*() {
    const state = yield* Ref.make<unknown>(policy.schedule.initial)
    const recent = yield* Ref.make<ReadonlyArray<number>>([])
    /** The delay before the next restart, or None when the policy gives up. */
    const next = (exit: Exit.Exit<unknown, unknown>, healthy: boolean) =>
      Effect.gen(function*() {
        if (healthy) yield* Ref.set(state, policy.schedule.initial)
        const now = yield* Clock.currentTimeMillis
        if (Option.isSome(policy.intensity)) {
          const { maxRestarts, period } = policy.intensity.value
          const window = (yield* Ref.get(recent)).filter((at) => now - at < Duration.toMillis(period))
          if (window.length >= maxRestarts) return Option.none<Duration.Duration>()
          yield* Ref.set(recent, [...window, now])
        }
        const [stepped, , decision] = yield* policy.schedule.step(now, exit, yield* Ref.get(state))
        yield* Ref.set(state, stepped)
        return ScheduleDecision.isDone(decision)
          ? Option.none<Duration.Duration>()
          : Option.some(Duration.millis(Math.max(0, ScheduleIntervals.start(decision.intervals) - now)))
      })
    return { next }
  })

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

  /** One incarnation, in its own fiber and Scope: its exit, and whether it was healthy. */
  const incarnate = <A, E, R>(key: string, effect: Effect.Effect<A, E, R>, policy: RestartPolicy, restarts: number) =>
    Effect.gen(function*() {
      const startedAt = yield* Clock.currentTimeMillis
      const vouched = yield* Ref.make(false)
      yield* setChild({ key, status: "running", restarts })
      yield* PubSub.publish(events, Event.ChildStarted({ key, restarts }))
      const incarnation = Incarnation.of({ key, restarts, healthy: Ref.set(vouched, true) })
      // When it is over, so is all it forked and held.
      const fiber = yield* Effect.fork(Effect.scoped(effect).pipe(Effect.provideService(Incarnation, incarnation)))
      const exit: Exit.Exit<A, E> = yield* Fiber.await(fiber).pipe(
        Effect.onInterrupt(() =>
          Effect.flatMap(Fiber.interrupt(fiber), (exit) => PubSub.publish(events, Event.ChildExited({ key, exit })))
        )
      )
      yield* PubSub.publish(events, Event.ChildExited({ key, exit }))
      const ranFor = (yield* Clock.currentTimeMillis) - startedAt
      const healthy = (yield* Ref.get(vouched)) ||
        Option.exists(policy.resetAfter, (after) => ranFor >= Duration.toMillis(after))
      return { exit, healthy }
    })

  const escalate = (key: string, exit: Exit.Exit<unknown, unknown>) =>
    Effect.gen(function*() {
      const cause = Exit.isFailure(exit) ? exit.cause : Cause.empty
      yield* PubSub.publish(events, Event.ChildEscalated({ key, cause }))
      const escalated = new Escalated({ key, cause })
      yield* Deferred.fail(escalation, escalated)
      return yield* Effect.fail(escalated)
    })

  const supervise = <A, E, R>(key: string, effect: Effect.Effect<A, E, R>, policy: RestartPolicy) =>
    Effect.gen(function*() {
      const budget = yield* restartBudget(policy)
      let restarts = 0
      while (true) {
        const { exit, healthy } = yield* incarnate(key, effect, policy, restarts)
        if (!restartDue(policy, exit)) return
        yield* setChild({ key, status: "restarting", restarts })
        const delay = yield* budget.next(exit, healthy)
        if (Option.isNone(delay)) return yield* escalate(key, exit)
        yield* PubSub.publish(events, Event.ChildRestarting({ key, restarts: restarts + 1, delay: delay.value }))
        // On the Clock, so TestClock drives it.
        yield* Effect.sleep(delay.value)
        restarts += 1
      }
    }).pipe(
      // Announced first: whoever sees the key gone from `children` has the event too.
      Effect.ensuring(Effect.zipRight(PubSub.publish(events, Event.ChildRemoved({ key })), removeChild(key))),
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
  ): Effect.Effect<void, SupervisorClosed, Exclude<Exclude<R, Scope.Scope>, Incarnation>> =>
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
