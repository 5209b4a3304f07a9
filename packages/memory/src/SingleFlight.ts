/**
 * The overlap guard of a background job: never two runs at once, and no
 * request lost. A request while idle starts a run; requests during a run are
 * stashed, and however many arrive, exactly one trailing run follows. A
 * failed run is reported and does not stall the ones after it.
 *
 * @since 0.0.0
 */
import { Effect, type Scope, Stream, SubscriptionRef } from "effect"

/**
 * @since 0.0.0
 */
export type State =
  | { readonly _tag: "Idle" }
  | { readonly _tag: "Running" }
  /** Running, with a trailing run owed. */
  | { readonly _tag: "Stashed" }

const idle: State = { _tag: "Idle" }
const running: State = { _tag: "Running" }
const stashed: State = { _tag: "Stashed" }

/**
 * @since 0.0.0
 */
export interface SingleFlight {
  /** Starts a run, or stashes one behind the current run. Returns at once. */
  readonly request: Effect.Effect<"started" | "stashed">
  /** Waits until no run is going and none is owed. */
  readonly idle: Effect.Effect<void>
  readonly state: Effect.Effect<State>
}

/**
 * Runs `job` under the guard; its fibers live in the current scope, so
 * closing it interrupts a run in progress. `onFailure` sees each failed run.
 *
 * @since 0.0.0
 */
export const make = <E, R>(
  job: Effect.Effect<void, E, R>,
  onFailure: (error: E) => Effect.Effect<void> = () => Effect.void
): Effect.Effect<SingleFlight, never, Scope.Scope | R> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const context = yield* Effect.context<R>()
    const state = yield* SubscriptionRef.make<State>(idle)
    const once = job.pipe(
      Effect.catchAll(onFailure),
      Effect.catchAllDefect((defect) => Effect.logError("SingleFlight: a run died", defect)),
      Effect.provide(context)
    )
    // After each run: an owed run is taken (Stashed → Running), else the guard goes idle.
    const next = SubscriptionRef.modify(state, (s): readonly [boolean, State] =>
      s._tag === "Stashed" ? [true, running] : [false, idle]
    )
    const loop = Effect.iterate(true, { while: (again) => again, body: () => Effect.zipRight(once, next) }).pipe(
      // Interrupted mid-run: nothing runs any more, and nobody waits on a run that will not come.
      Effect.onInterrupt(() => SubscriptionRef.set(state, idle))
    )
    const request = SubscriptionRef.modifyEffect(state, (s) =>
      s._tag === "Idle"
        ? Effect.as(Effect.forkIn(loop, scope), ["started", running] as const)
        : Effect.succeed(["stashed", stashed] as const)
    )
    const flight: SingleFlight = {
      request,
      idle: state.changes.pipe(Stream.filter((s) => s._tag === "Idle"), Stream.runHead, Effect.asVoid),
      state: SubscriptionRef.get(state)
    }
    return flight
  })
