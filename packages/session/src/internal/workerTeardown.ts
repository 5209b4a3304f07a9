/**
 * Stopping a worker in bounded time, also from a finalizer.
 *
 * Killing a worker interrupts its task, whose scope then closes the
 * worker's session and its process. A finalizer is uninterruptible, so a
 * plain timeout around that wait could not cut it short: if the CLI never
 * answers the session's closing `interrupt`, the wait would never end. So
 * each wait here runs `interruptible` under its timeout, and the way out
 * does not depend on interruption at all: past the bound the pool SIGKILLs
 * the worker's process group itself, through the hold it took on the
 * process at spawn, and the session's close ends with its stdout.
 */
import { ProcessHost, type Task } from "@skein/kernel"
import { Duration, Effect, Option, Ref } from "effect"

/** The session's close waits this long for the answer to its `interrupt`. */
export const interruptAllowance = Duration.seconds(1)
/** For the session's own steps around the stop escalation. */
export const slack = Duration.seconds(1)
/** Once its group is SIGKILLed, the session's close only has to see stdout end. */
export const afterKill = Duration.seconds(2)

/**
 * How long a worker may take to stop by itself: the session's interrupt,
 * then ProcessHost's escalation (stdin closed, SIGTERM, SIGKILL).
 */
export const stopBound = (stopTimeouts: Partial<ProcessHost.StopTimeouts> | undefined): Duration.Duration =>
  [
    interruptAllowance,
    stopTimeouts?.stdinGrace ?? ProcessHost.defaultStopTimeouts.stdinGrace,
    stopTimeouts?.termGrace ?? ProcessHost.defaultStopTimeouts.termGrace,
    slack
  ].reduce<Duration.Duration>((sum, part) => Duration.sum(sum, part), Duration.zero)

/** The pool's hold on one worker's process: set when the worker's session spawns it. */
export type Hold = Ref.Ref<Option.Option<ProcessHost.ChildProcess>>

export const makeHold: Effect.Effect<Hold> = Ref.make(Option.none())

/** `host`, keeping in `hold` each child it spawns. */
export const holding = (host: ProcessHost.ProcessHost["Type"], hold: Hold): ProcessHost.ProcessHost["Type"] =>
  ProcessHost.ProcessHost.of({
    spawn: (options) => Effect.tap(host.spawn(options), (child) => Ref.set(hold, Option.some(child)))
  })

export interface StopOptions {
  readonly taskId: string
  /** Interrupts the worker's task and waits for its end. */
  readonly kill: Effect.Effect<Task.TaskRecord>
  /** The task's record as it is now. */
  readonly current: Effect.Effect<Task.TaskRecord>
  readonly hold: Hold
  /** How long `kill` may take before the process group is SIGKILLed. */
  readonly bound: Duration.Duration
}

/** SIGKILLs the worker's process group, if its process still runs. */
const killGroup = (options: StopOptions) =>
  Effect.gen(function*() {
    const child = yield* Ref.get(options.hold)
    if (Option.isNone(child) || !(yield* child.value.isRunning)) return
    yield* Effect.logWarning(
      `worker task ${options.taskId} did not stop within ${Duration.format(options.bound)}; SIGKILL to its process group`
    )
    yield* child.value.kill("SIGKILL")
  })

/**
 * `kill`, bounded. Past `bound` a fiber of its own SIGKILLs the worker's
 * process group, which ends the wait even where it cannot be interrupted;
 * past `afterKill` more the task is left to end in the background and its
 * record is returned as it is.
 */
export const stop = (options: StopOptions): Effect.Effect<Task.TaskRecord> =>
  Effect.scoped(Effect.gen(function*() {
    yield* Effect.sleep(options.bound).pipe(Effect.zipRight(killGroup(options)), Effect.interruptible, Effect.forkScoped)
    const killed = yield* Effect.interruptible(options.kill).pipe(
      Effect.timeoutOption(Duration.sum(options.bound, afterKill))
    )
    if (Option.isSome(killed)) return killed.value
    yield* Effect.logError(
      `worker task ${options.taskId} had not ended ${Duration.format(afterKill)} after SIGKILL; no longer waiting for it`
    )
    return yield* options.current
  }))
