/**
 * The turns' lock: one holder at a time, and it can be asked whether a holder
 * is inside its section. A section may suspend (a timer's fiber interrupted,
 * say) between a tracker step and the effects of its outputs; a read must not
 * be stepped in between, so the lock-free path checks `holding` first.
 */
import { Effect } from "effect"

export interface TurnLock {
  /** Runs `section` as the one holder. */
  readonly locked: <A, E>(section: Effect.Effect<A, E>) => Effect.Effect<A, E>
  /** Whether a holder is inside its section now. */
  readonly holding: () => boolean
}

export const make: Effect.Effect<TurnLock> = Effect.map(Effect.makeSemaphore(1), (semaphore) => {
  let holding = false
  const release = Effect.sync(() => {
    holding = false
  })
  return {
    locked: <A, E>(section: Effect.Effect<A, E>) =>
      semaphore.withPermits(1)(Effect.suspend(() => {
        holding = true
        return Effect.ensuring(section, release)
      })),
    holding: () => holding
  }
})
