/**
 * A window between takes: within `window` ms of the last take, the next one
 * waits out the rest, so what arrives meanwhile goes in the same batch. After
 * a quiet window the next take goes at once, so the first change is never
 * held back.
 *
 * The window runs on the live clock: it paces work, it is no timeout a test
 * steps through with `TestClock`.
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"

export interface Pacer {
  /** Waits out the rest of the window, if the last take was within it (and `skip` is not true). */
  readonly wait: Effect.Effect<void>
  /** Marks a take: the next window starts now. */
  readonly took: () => void
}

const liveClock = Clock.make()

export const make = (window: number, skip: () => boolean = () => false): Pacer => {
  let last = Number.NEGATIVE_INFINITY
  return {
    wait: Effect.suspend(() => {
      const wait = last + window - performance.now()
      return wait > 0 && !skip() ? liveClock.sleep(Duration.millis(wait)) : Effect.void
    }),
    took: () => {
      last = performance.now()
    }
  }
}
