/**
 * The turns' lock: one holder at a time, and it can be asked whether a holder
 * is inside its section. A section may suspend (a timer's fiber interrupted,
 * say) between a tracker step and the effects of its outputs; a read must not
 * be stepped in between, so the lock-free path checks `holding` first.
 */
import { Effect, type Exit } from "effect"

export interface TurnLock {
  /** Runs `section` as the one holder. */
  readonly locked: <A, E>(section: Effect.Effect<A, E>) => Effect.Effect<A, E>
  /** Whether a holder is inside its section now. */
  readonly holding: () => boolean
}

/**
 * One region that cannot be interrupted between taking the permit, running
 * the section and giving it back, as `withPermits` does, with `holding` set
 * inside it: one region instead of `withPermits` around an `ensuring`.
 */
export const make: Effect.Effect<TurnLock> = Effect.map(Effect.makeSemaphore(1), (semaphore) => {
  let holding = false
  const release = <A, E>(exit: Exit.Exit<A, E>) => {
    holding = false
    return Effect.zipRight(semaphore.release(1), exit)
  }
  return {
    locked: <A, E>(section: Effect.Effect<A, E>) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(restore(semaphore.take(1)), () => {
          holding = true
          return Effect.flatMap(Effect.exit(restore(section)), release)
        })
      ),
    holding: () => holding
  }
})
