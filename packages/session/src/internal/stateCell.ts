/**
 * The session's state: a value and the stream of its changes, read as a
 * `Subscribable` like a `SubscriptionRef`, updated once per read of stdout.
 *
 * A `SubscriptionRef` takes a semaphore for each update (about 40 effect
 * operations, more than the rest of a read's fold), to keep the value and the
 * changes it publishes in the same order. Here an update is one synchronous
 * step, which a fiber runs whole: the value and its publication cannot be
 * reordered, and no lock is needed. Each change carries a version, so a
 * subscriber that reads the current value after subscribing skips the
 * changes that value already holds.
 */
import { Effect, Stream, Subscribable } from "effect"
import * as LazyHub from "./lazyHub.js"

export interface StateCell<A> extends Subscribable.Subscribable<A> {
  /** Replaces the value with `f` of it and publishes the new one. */
  readonly update: (f: (a: A) => A) => Effect.Effect<void>
  /** `update` as a synchronous step, for a caller already inside one. */
  readonly unsafeUpdate: (f: (a: A) => A) => void
  /** The value now, for synchronous readers. */
  readonly unsafeGet: () => A
}

interface Change<A> {
  readonly version: number
  readonly value: A
}

/** A cell holding `initial`. Like a `SubscriptionRef`'s, its changes never end. */
export const make = <A>(initial: A): Effect.Effect<StateCell<A>> =>
  Effect.sync(() => {
    // Made on the first subscription to `changes`: until then an update publishes to no one.
    const hub = LazyHub.make<Change<A>>()
    let value = initial
    let version = 0
    const get = Effect.sync(() => value)
    const changes: Stream.Stream<A> = Stream.unwrapScoped(Effect.map(hub.subscribe, (subscription) => {
      // Read after subscribing: a change published in between is in both, and skipped in the queue.
      const seen = version
      return Stream.concat(
        Stream.succeed(value),
        Stream.fromQueue(subscription).pipe(
          Stream.filter((change) => change.version > seen),
          Stream.map((change) => change.value)
        )
      )
    }))
    const unsafeUpdate = (f: (a: A) => A) => {
      value = f(value)
      hub.unsafeOffer({ version: ++version, value })
    }
    const update = (f: (a: A) => A) => Effect.sync(() => unsafeUpdate(f))
    return Object.assign(Subscribable.make({ get, changes }), { update, unsafeUpdate, unsafeGet: () => value })
  })
