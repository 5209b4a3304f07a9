/**
 * A FiberMap made in a scope on its first `run`. A session keeps two (the
 * turns' timers, the CLI's requests in flight), about 2 KB each, and most
 * sessions never set a timer or get a request; until the first `run` there
 * is nothing to remove, clear or count.
 */
import { Effect, FiberMap, Scope } from "effect"

export interface LazyFiberMap<K> {
  /** `FiberMap.run`: runs `effect` under `key`, interrupting the fiber already there. */
  readonly run: <A, E>(key: K, effect: Effect.Effect<A, E>) => Effect.Effect<void>
  readonly remove: (key: K) => Effect.Effect<void>
  readonly clear: Effect.Effect<void>
  readonly size: Effect.Effect<number>
}

export const make = <K>(scope: Scope.Scope): LazyFiberMap<K> => {
  let map: FiberMap.FiberMap<K> | undefined
  // Two first runs may both make one: `??=` keeps the first (the other, empty, closes with the scope).
  const get = Effect.suspend(() =>
    map !== undefined ? Effect.succeed(map) : Effect.map(Scope.extend(FiberMap.make<K>(), scope), (made) => map ??= made)
  )
  const whenMade = <A>(f: (map: FiberMap.FiberMap<K>) => Effect.Effect<A>, otherwise: A) =>
    Effect.suspend(() => map === undefined ? Effect.succeed(otherwise) : f(map))
  return {
    run: (key, effect) => Effect.flatMap(get, (m) => Effect.asVoid(FiberMap.run(m, key, effect))),
    remove: (key) => whenMade((m) => FiberMap.remove(m, key), undefined),
    clear: whenMade(FiberMap.clear, undefined),
    size: whenMade(FiberMap.size, 0)
  }
}
