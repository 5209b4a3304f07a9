/**
 * Ending a child. `stop` escalates: close stdin, wait `stdinGrace`, SIGTERM
 * the group, wait `termGrace`, SIGKILL the group. `release`, run when the
 * spawn's scope closes, stops, then always SIGKILLs the group (the leader
 * exiting says nothing about its background children) and every escaped
 * process carrying the child's marker, and drops it from the journal.
 */
import { Deferred, Duration, Effect, Option } from "effect"
import type * as ProcessHost from "../ProcessHost.js"
import * as Errors from "../ProcessHost.js"
import type { ProcessJournal } from "../ProcessJournal.js"
import type { NodeChild } from "./childStart.js"
import * as procfs from "./procfs.js"

/** After the final SIGKILL, how long a leader may take to report its exit. */
const killWait = Duration.seconds(10)

export interface Timeouts {
  readonly stdinGrace: Duration.Duration
  readonly termGrace: Duration.Duration
}

/** The defaults, overridden by each layer in turn (the host's, then the spawn's). */
export const resolveTimeouts = (...layers: ReadonlyArray<Partial<ProcessHost.StopTimeouts> | undefined>): Timeouts => {
  let stdinGrace = Duration.decode(Errors.defaultStopTimeouts.stdinGrace)
  let termGrace = Duration.decode(Errors.defaultStopTimeouts.termGrace)
  for (const layer of layers) {
    if (layer?.stdinGrace !== undefined) stdinGrace = Duration.decode(layer.stdinGrace)
    if (layer?.termGrace !== undefined) termGrace = Duration.decode(layer.termGrace)
  }
  return { stdinGrace, termGrace }
}

/** A signal to the whole group; a failure (other than ESRCH) is logged, never raised. */
export const killGroup = (pid: number) => (signal: NodeJS.Signals): Effect.Effect<void> =>
  Effect.suspend(() => {
    const failure = procfs.killGroup(pid, signal)
    return failure === undefined
      ? Effect.void
      : Effect.logWarning(`ProcessHost: ${signal} to group ${pid} failed: ${failure}`)
  })

export interface StopOptions {
  readonly pid: number
  readonly exited: Deferred.Deferred<ProcessHost.ExitStatus>
  readonly closeStdin: Effect.Effect<void>
  readonly kill: (signal: NodeJS.Signals) => Effect.Effect<void>
  readonly timeouts: Timeouts
}

/** The exit, if the leader has exited. */
const exitedNow = (exited: Deferred.Deferred<ProcessHost.ExitStatus>): Effect.Effect<Option.Option<ProcessHost.ExitStatus>> =>
  Effect.flatMap(Deferred.poll(exited), (done) => Option.isSome(done) ? Effect.asSome(done.value) : Effect.succeedNone)

/**
 * Waits up to `grace` for the exit; a zero grace only looks. A leader that
 * has exited already (a CLI that ends at stdin's EOF, by the time the scope
 * reaches its release) is answered at once, without a timer and the race
 * against it.
 */
const waitFor = (
  exited: Deferred.Deferred<ProcessHost.ExitStatus>,
  grace: Duration.Duration
): Effect.Effect<Option.Option<ProcessHost.ExitStatus>> =>
  Duration.isZero(grace)
    ? exitedNow(exited)
    : Effect.flatMap(exitedNow(exited), (now) =>
      Option.isSome(now)
        ? Effect.succeed(now)
        // Interruptible: the stop also runs inside the (uninterruptible) scope
        // finalizer, where the timeout could not otherwise cut the wait short.
        : Effect.timeoutOption(Effect.interruptible(Deferred.await(exited)), grace))

/**
 * The escalation, up to the SIGKILL; `afterKill` is the wait that follows
 * it. It runs on the caller's fiber: a scope close that ends many children
 * signals each one as soon as its finalizer runs, not after a fork per child
 * has waited its turn behind the other finalizers.
 *
 * With no stdin grace nothing waits on the EOF, so the signal goes first,
 * and stdin closes after a yield that lets the other finalizers of the same
 * scope close signal their children (ending a pipe costs more than a signal).
 */
const escalate = <A>(
  options: StopOptions,
  early: (status: ProcessHost.ExitStatus) => A,
  afterKill: Effect.Effect<A>
): Effect.Effect<A> => {
  const { exited, kill, timeouts } = options
  const stdinFirst = !Duration.isZero(timeouts.stdinGrace)
  const termWaits = !Duration.isZero(timeouts.termGrace)
  return Effect.suspend(() => {
    // Once, whichever path gets there first: the one after a signal, or the end.
    let stdinOpen = true
    const closeStdin = Effect.suspend(() => {
      if (!stdinOpen) return Effect.void
      stdinOpen = false
      return options.closeStdin
    })
    const afterSignal = stdinFirst ? Effect.yieldNow() : Effect.zipRight(Effect.yieldNow(), closeStdin)
    return Effect.gen(function*() {
      if (stdinFirst) yield* closeStdin
      const afterStdin = yield* waitFor(exited, timeouts.stdinGrace)
      if (Option.isSome(afterStdin)) return early(afterStdin.value)
      yield* kill("SIGTERM")
      if (termWaits) yield* afterSignal
      const afterTerm = yield* waitFor(exited, timeouts.termGrace)
      if (Option.isSome(afterTerm)) return early(afterTerm.value)
      yield* kill("SIGKILL")
      if (!termWaits) yield* afterSignal
      return yield* afterKill
    }).pipe(Effect.ensuring(closeStdin))
  }).pipe(Effect.withSpan("ProcessHost.stop", { attributes: { pid: options.pid }, captureStackTrace: false }))
}

/** `ChildProcess.stop`: waits for the leader however long it takes after SIGKILL. */
export const makeStop = (options: StopOptions): Effect.Effect<ProcessHost.ExitStatus> =>
  escalate(options, (status) => status, Deferred.await(options.exited))

/**
 * The stop a release runs: none if the leader did not report its exit
 * `killWait` after SIGKILL. A leader that has exited already has nothing to
 * stop (its group is still killed by the release): no escalation, no span.
 */
export const makeReleaseStop = (options: StopOptions): Effect.Effect<Option.Option<ProcessHost.ExitStatus>> => {
  const stop = escalate(options, Option.some, waitFor(options.exited, killWait))
  return Effect.flatMap(exitedNow(options.exited), (now) => Option.isSome(now) ? Effect.zipRight(options.closeStdin, Effect.succeed(now)) : stop)
}

export const release = (options: {
  readonly pid: number
  readonly marker: string
  /** The leader's identity when it started, if it could be read. */
  readonly identity: Option.Option<procfs.Identity>
  readonly node: NodeChild
  /** See `makeReleaseStop`. */
  readonly stop: Effect.Effect<Option.Option<ProcessHost.ExitStatus>>
  readonly kill: (signal: NodeJS.Signals) => Effect.Effect<void>
  readonly journal: ProcessJournal["Type"]
  /** Kills what carries a marker; batched across the children a scope close ends (see `Batcher`). */
  readonly killMarked: (marker: string) => Effect.Effect<ReadonlyArray<number>>
}): Effect.Effect<void> =>
  Effect.gen(function*() {
    const { identity, kill, node, pid } = options
    const ended = yield* options.stop
    if (Option.isNone(ended)) {
      yield* Effect.logWarning(`ProcessHost: process ${pid} did not exit after SIGKILL`)
    }
    // Always: the leader exiting says nothing about its background children.
    // The leader is reaped by now, so once the group empties its id may be
    // recycled by a new leader with the same pid: spare a pid that runs
    // another program.
    // The start time alone decides: the leader may have exec'd another program.
    const recycled = Option.isSome(identity) &&
      Option.exists(yield* procfs.startTimeOf(identity.value.source, pid), (now) => now !== identity.value.startTime)
    if (!recycled) yield* kill("SIGKILL")
    // Then whatever left the group (setsid) but still carries the marker.
    const escapees = yield* options.killMarked(options.marker)
    if (escapees.length > 0) {
      yield* Effect.logDebug(`ProcessHost: killed ${escapees.length} escaped descendant(s) of ${pid}`)
    }
    node.stdout.destroy()
    node.stderr.destroy()
    node.stdin.destroy()
    yield* options.journal.remove(pid)
  })
