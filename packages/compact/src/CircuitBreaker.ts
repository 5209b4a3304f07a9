/**
 * Stops automatic compaction after repeated failures.
 *
 * A pass that fails (an error, or every pass declining) counts one failure;
 * a success resets the count. At `threshold` consecutive failures (3 by
 * default) the breaker opens: automatic runs are skipped, so a session
 * whose compaction cannot succeed does not retry after every turn. Manual
 * runs always go through, and the first success closes the breaker again.
 *
 * @since 0.0.0
 */
import { Effect, Exit, Schema, SubscriptionRef } from "effect"

/**
 * @since 0.0.0
 */
export interface State {
  readonly consecutiveFailures: number
  readonly open: boolean
  /** Why the last failure failed. */
  readonly lastFailure: string | undefined
}

/**
 * An automatic run was skipped: the breaker is open.
 *
 * @since 0.0.0
 */
export class BreakerOpen extends Schema.TaggedError<BreakerOpen>()("BreakerOpen", {
  consecutiveFailures: Schema.Number,
  lastFailure: Schema.optional(Schema.String)
}) {}

/** @since 0.0.0 */
export const initial: State = { consecutiveFailures: 0, open: false, lastFailure: undefined }

/**
 * The next state after a run. Pure.
 *
 * @since 0.0.0
 */
export const record = (state: State, outcome: { readonly ok: true } | { readonly ok: false; readonly reason: string }, threshold: number): State =>
  outcome.ok
    ? initial
    : {
      consecutiveFailures: state.consecutiveFailures + 1,
      open: state.consecutiveFailures + 1 >= threshold,
      lastFailure: outcome.reason
    }

/**
 * @since 0.0.0
 */
export interface CircuitBreaker {
  readonly state: SubscriptionRef.SubscriptionRef<State>
  /**
   * Runs `effect` and records its outcome (`succeeded` tells a success from
   * a value that counts as a failure). With `automatic`, fails with
   * `BreakerOpen` instead of running while the breaker is open.
   */
  readonly guard: <A, E, R>(
    effect: Effect.Effect<A, E, R>,
    options: { readonly automatic: boolean; readonly succeeded: (a: A) => boolean; readonly describe?: (a: A) => string }
  ) => Effect.Effect<A, E | BreakerOpen, R>
}

/**
 * @since 0.0.0
 */
export const make = Effect.fn("CircuitBreaker.make")(function*(options?: { readonly threshold?: number | undefined }) {
  const threshold = options?.threshold ?? 3
  const state = yield* SubscriptionRef.make(initial)
  const guard: CircuitBreaker["guard"] = (effect, opts) =>
    Effect.gen(function*() {
      const now = yield* SubscriptionRef.get(state)
      if (opts.automatic && now.open) {
        return yield* new BreakerOpen({ consecutiveFailures: now.consecutiveFailures, lastFailure: now.lastFailure })
      }
      return yield* effect.pipe(
        // An interrupted run (the session closing) says nothing about compaction: not counted.
        Effect.onExit((exit) =>
          Exit.isInterrupted(exit) ? Effect.void : SubscriptionRef.update(state, (s) =>
            record(
              s,
              Exit.isSuccess(exit)
                ? opts.succeeded(exit.value) ? { ok: true } : { ok: false, reason: opts.describe?.(exit.value) ?? "declined" }
                : { ok: false, reason: "failed" },
              threshold
            ))
        )
      )
    })
  const breaker: CircuitBreaker = { state, guard }
  return breaker
})
