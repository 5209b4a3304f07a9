/**
 * When a live session has been idle long enough to stop: no turn running and
 * none waiting (every prompt sent has reached its `session.idle`), for the
 * whole timeout. A prompt whose turn has not started yet (the CLI still
 * booting, or the turn queued) keeps the session up.
 */
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type * as SubscriptionRef from "effect/SubscriptionRef"

export interface Signals {
  readonly busy: SubscriptionRef.SubscriptionRef<boolean>
  /** Turns that reached `session.idle`. */
  readonly ended: Stream.Stream<number>
  /** Prompts sent to this session. */
  readonly prompts: SubscriptionRef.SubscriptionRef<number>
}

/**
 * Waits for `timeout` of silence in an idle state, and gives the prompt
 * count it saw then, so that the caller can check under its lock that no
 * prompt slipped in since.
 */
export const idleFor = (signals: Signals, timeout: Duration.DurationInput): Effect.Effect<number> =>
  Stream.zipLatestAll(signals.busy.changes, signals.ended, signals.prompts.changes).pipe(
    Stream.debounce(timeout),
    Stream.filter(([busy, ended, prompts]) => !busy && ended >= prompts),
    Stream.runHead,
    Effect.flatMap(Option.match({ onNone: () => Effect.never, onSome: ([, , prompts]) => Effect.succeed(prompts) }))
  )
