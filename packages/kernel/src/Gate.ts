/**
 * Gates decide whether an automatic trigger fires. Each gate is a named
 * check that passes (with a value) or stops (with a reason). `evaluate` runs
 * them in order, cheapest first, and stops at the first that says no, so a
 * cheap `stat` spares a directory scan, and a scan spares taking a lock.
 *
 * @since 0.0.0
 */
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import type { Scope } from "effect"
import { Clock, Duration, Effect, Option, SynchronizedRef } from "effect"
import * as FileLock from "./FileLock.js"

/**
 * @since 0.0.0
 */
export interface Pass<A> {
  readonly _tag: "Pass"
  readonly value: A
}

/**
 * @since 0.0.0
 */
export interface Stop {
  readonly _tag: "Stop"
  readonly reason: string
}

/**
 * What one gate says.
 *
 * @since 0.0.0
 */
export type Decision<A> = Pass<A> | Stop

/**
 * @since 0.0.0
 */
export const pass: {
  (): Decision<void>
  <A>(value: A): Decision<A>
} = <A>(value?: A): Decision<A | undefined> => ({ _tag: "Pass", value })

/**
 * @since 0.0.0
 */
export const stop = (reason: string): Decision<never> => ({ _tag: "Stop", reason })

/**
 * A named check. It may do IO (a `stat`, a scan, taking a lock).
 *
 * @since 0.0.0
 */
export interface Gate<A, E = never, R = never> {
  readonly name: string
  readonly check: Effect.Effect<Decision<A>, E, R>
}

/**
 * @since 0.0.0
 */
export const make = <A, E, R>(name: string, check: Effect.Effect<Decision<A>, E, R>): Gate<A, E, R> => ({
  name,
  check
})

/**
 * All gates passed; `values` holds each gate's value, in order.
 *
 * @since 0.0.0
 */
export interface Passed<A> {
  readonly _tag: "Passed"
  readonly values: A
  readonly gates: ReadonlyArray<string>
}

/**
 * The gate named `gate` stopped the trigger; gates after it were not run.
 *
 * @since 0.0.0
 */
export interface Stopped {
  readonly _tag: "Stopped"
  readonly gate: string
  readonly reason: string
  /** The gates that passed before it. */
  readonly passed: ReadonlyArray<string>
}

/**
 * @since 0.0.0
 */
export type Outcome<A> = Passed<A> | Stopped

/**
 * @since 0.0.0
 */
export type Any = Gate<unknown, unknown, unknown>

/**
 * @since 0.0.0
 */
export type Value<G> = G extends Gate<infer A, infer _E, infer _R> ? A : never

/**
 * @since 0.0.0
 */
export type Error<G> = G extends Gate<infer _A, infer E, infer _R> ? E : never

/**
 * @since 0.0.0
 */
export type Context<G> = G extends Gate<infer _A, infer _E, infer R> ? R : never

/**
 * Runs the gates in order and stops at the first that says no.
 *
 * @since 0.0.0
 */
export function evaluate<const Gates extends ReadonlyArray<Any>>(
  gates: Gates
): Effect.Effect<
  Outcome<{ -readonly [K in keyof Gates]: Value<Gates[K]> }>,
  Error<Gates[number]>,
  Context<Gates[number]>
>
// `values` is filled in the order of `gates`, one entry per gate, which is
// what the tuple type of the signature above says.
export function evaluate(
  gates: ReadonlyArray<Any>
): Effect.Effect<Outcome<ReadonlyArray<unknown>>, unknown, unknown> {
  return evaluateAll(gates)
}

const evaluateAll = Effect.fn("Gate.evaluate")(function*(gates: ReadonlyArray<Any>) {
  const values: Array<unknown> = []
  const passed: Array<string> = []
  for (const gate of gates) {
    const decision = yield* gate.check.pipe(Effect.withSpan(`Gate.check ${gate.name}`))
    if (decision._tag === "Stop") {
      yield* Effect.annotateCurrentSpan({ stoppedBy: gate.name, reason: decision.reason })
      const stopped: Outcome<ReadonlyArray<unknown>> = {
        _tag: "Stopped",
        gate: gate.name,
        reason: decision.reason,
        passed
      }
      return stopped
    }
    values.push(decision.value)
    passed.push(gate.name)
  }
  const done: Outcome<ReadonlyArray<unknown>> = { _tag: "Passed", values, gates: passed }
  return done
})

/**
 * Runs `gate`'s check at most once per `interval` (by the `Clock`) and
 * answers with the last decision in between. Failures are not remembered.
 *
 * @since 0.0.0
 */
export const throttle = <A, E, R>(
  gate: Gate<A, E, R>,
  interval: Duration.DurationInput
): Effect.Effect<Gate<A, E, R>> =>
  Effect.map(
    SynchronizedRef.make(Option.none<{ readonly at: number; readonly decision: Decision<A> }>()),
    (last) =>
      make(
        gate.name,
        SynchronizedRef.modifyEffect(last, (previous) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) =>
            Option.isSome(previous) && now - previous.value.at < Duration.toMillis(interval)
              ? Effect.succeed([previous.value.decision, previous] as const)
              : Effect.map(gate.check, (decision) => [decision, Option.some({ at: now, decision })] as const)
          ))
      )
  )

const isNotFound = (error: PlatformError): boolean => error._tag === "SystemError" && error.reason === "NotFound"

const format = (millis: number): string => Duration.format(Duration.millis(Math.max(0, Math.floor(millis))))

/**
 * Passes when at least `minimum` has passed since the mtime of the file at
 * `path` (one `stat`), or when there is no such file.
 *
 * @since 0.0.0
 */
export const elapsed = (options: {
  readonly path: string
  readonly minimum: Duration.DurationInput
  readonly name?: string
}): Gate<void, FileLock.FileLockError, FileSystem.FileSystem> =>
  make(
    options.name ?? "time",
    Effect.gen(function*() {
      const last = yield* FileLock.lastRun(options.path)
      if (Option.isNone(last)) return pass()
      const since = (yield* Clock.currentTimeMillis) - last.value.getTime()
      const minimum = Duration.toMillis(options.minimum)
      return since >= minimum ? pass() : stop(`last run ${format(since)} ago, less than ${format(minimum)}`)
    })
  )

/**
 * Counts the files in `directory` (not recursive) modified after the mtime of
 * the file at `since` (all of them if it does not exist), and passes with the
 * count when there are at least `atLeast`. `include` selects file names
 * (e.g. other sessions' transcripts, not the current one). The scan runs at
 * most once per `scanEvery` (default 10 minutes); see `throttle`.
 *
 * @since 0.0.0
 */
export const activity = (options: {
  readonly directory: string
  readonly since: string
  readonly atLeast: number
  readonly include?: (name: string) => boolean
  readonly scanEvery?: Duration.DurationInput
  readonly name?: string
}): Effect.Effect<Gate<number, PlatformError, FileSystem.FileSystem | Path.Path>> =>
  throttle(
    make(
      options.name ?? "activity",
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const path = yield* Path.Path
        const threshold = yield* fs.stat(options.since).pipe(
          Effect.map((info) => Option.getOrElse(info.mtime, () => new Date(0)).getTime()),
          Effect.catchIf(isNotFound, () => Effect.succeed(0))
        )
        const names = yield* fs.readDirectory(options.directory).pipe(
          Effect.catchIf(isNotFound, () => Effect.succeed<Array<string>>([]))
        )
        let count = 0
        for (const name of names) {
          if (options.include !== undefined && !options.include(name)) continue
          const info = yield* fs.stat(path.join(options.directory, name)).pipe(Effect.option)
          if (Option.isSome(info) && info.value.type === "File" && Option.isSome(info.value.mtime)) {
            if (info.value.mtime.value.getTime() > threshold) count++
          }
        }
        return count >= options.atLeast
          ? pass(count)
          : stop(`${count} modified since the last run, fewer than ${options.atLeast}`)
      })
    ),
    options.scanEvery ?? Duration.minutes(10)
  )

/**
 * Takes the `FileLock` at `path` in the caller's scope and passes with it;
 * stops (with the holder's pid) when another process holds it.
 *
 * @since 0.0.0
 */
export const lock = (options: FileLock.Options & {
  readonly path: string
  readonly name?: string
}): Gate<FileLock.FileLock, FileLock.FileLockError, FileSystem.FileSystem | Scope.Scope> =>
  make(
    options.name ?? "lock",
    FileLock.acquire(options.path, options).pipe(
      Effect.map((held) => pass(held)),
      Effect.catchTag("LockHeld", (held) =>
        Effect.succeed(stop(`held by pid ${held.pid} since ${held.since.toISOString()}`)))
    )
  )
