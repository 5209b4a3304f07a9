/**
 * A PubSub made on its first subscription. Until someone subscribes,
 * publishing reaches no one, as it would on a PubSub with no subscriber, and
 * the session holds no PubSub (about 1.5 KB each, three per session) for
 * fan-outs an embedder may never use.
 */
import { Effect, PubSub, type Queue, type Scope } from "effect"

export interface LazyHub<A> {
  readonly subscribe: Effect.Effect<Queue.Dequeue<A>, never, Scope.Scope>
  readonly publish: (value: A) => Effect.Effect<boolean>
  readonly publishAll: (values: Iterable<A>) => Effect.Effect<boolean>
  /** Offers without an effect, for callers inside a synchronous step. */
  readonly unsafeOffer: (value: A) => void
  /** Whether anyone ever subscribed: until then a publish can be skipped, not built. */
  readonly subscribed: () => boolean
}

export const make = <A>(): LazyHub<A> => {
  let hub: PubSub.PubSub<A> | undefined
  // Two first subscribers may both make one: `??=` keeps the first, and both subscribe to it.
  const get = Effect.suspend(() => hub !== undefined ? Effect.succeed(hub) : Effect.map(PubSub.unbounded<A>(), (made) => hub ??= made))
  return {
    subscribe: Effect.flatMap(get, PubSub.subscribe),
    publish: (value) => Effect.suspend(() => hub === undefined ? Effect.succeed(true) : PubSub.publish(hub, value)),
    publishAll: (values) => Effect.suspend(() => hub === undefined ? Effect.succeed(true) : PubSub.publishAll(hub, values)),
    unsafeOffer: (value) => {
      hub?.unsafeOffer(value)
    },
    subscribed: () => hub !== undefined
  }
}
