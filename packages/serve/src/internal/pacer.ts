/**
 * A window between takes: within `window` ms of the last take, the next one
 * waits out the rest, so what arrives meanwhile goes in the same batch. After
 * a quiet window the next take goes at once, so the first change is never
 * held back.
 *
 * With `streaks`, a take waits only while takes keep coming: when the last
 * take itself came after a quiet stretch (two windows), the next one goes at
 * once too. A lone event just after another (a status, then the first
 * delta) is not held back; a storm is paced from its third take on.
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

export interface Options {
  /** No wait while this is true (the consumer is closing). */
  readonly skip?: (() => boolean) | undefined
  /** Wait only while takes keep coming (the last one was within two windows of the one before: a paced take counts). */
  readonly streaks?: boolean | undefined
}

const liveClock = Clock.make()

export const make = (window: number, options: Options = {}): Pacer => {
  const skip = options.skip ?? (() => false)
  let last = Number.NEGATIVE_INFINITY
  // Whether the last take came within two windows of the one before it.
  let streaming = !options.streaks
  return {
    wait: Effect.suspend(() => {
      const wait = last + window - performance.now()
      return wait > 0 && streaming && !skip() ? liveClock.sleep(Duration.millis(wait)) : Effect.void
    }),
    took: () => {
      const now = performance.now()
      if (options.streaks) streaming = now - last < window * 2
      last = now
    }
  }
}
