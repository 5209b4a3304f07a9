/**
 * An immutable set that only grows, at a mutable Set's cost on the usual
 * path. The translator threads its state linearly, so each `add` extends the
 * newest version in place; a version is a view of the shared log's first
 * `size` entries, so older versions still see only what they held. Adding
 * to an older version (a caller that kept a state and stepped it again)
 * copies its view first, so no version ever sees another's additions.
 */
export interface AppendOnlySet<A> {
  /** Each member's position in the log: members of this version are below `size`. */
  readonly log: Map<A, number> | undefined
  readonly size: number
}

/** No log until the first `add`: most translators are made and finish few messages. */
export const empty = <A>(): AppendOnlySet<A> => ({ log: undefined, size: 0 })

export const has = <A>(set: AppendOnlySet<A>, value: A): boolean => {
  const at = set.log?.get(value)
  return at !== undefined && at < set.size
}

export const add = <A>(set: AppendOnlySet<A>, value: A): AppendOnlySet<A> => {
  if (set.log === undefined) return { log: new Map([[value, 0]]), size: 1 }
  if (has(set, value)) return set
  // The newest version owns the log: extend it in place.
  if (set.log.size === set.size) {
    set.log.set(value, set.size)
    return { log: set.log, size: set.size + 1 }
  }
  // An older version: copy its own view, then add.
  const log = new Map<A, number>()
  for (const [member, at] of set.log) {
    if (at < set.size) log.set(member, at)
  }
  log.set(value, set.size)
  return { log, size: set.size + 1 }
}
