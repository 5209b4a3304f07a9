/**
 * Counts the Effect operations this process runs, by wrapping the fiber
 * runtime's op handlers (`Sync`, `OnSuccess`, `Async`, …): the run loop
 * dispatches every primitive it evaluates to one of them, so their calls are
 * the operations. `Async` is a fiber suspending. Only benches use it: every
 * operation then costs a call more.
 *
 *   import * as OpCounter from "./support/opCounter.js"
 *   const ops = OpCounter.install()
 *   const before = ops.total()
 *   …
 *   console.log(ops.total() - before)
 */
import { Effect } from "effect"

export interface OpCounter {
  /** Operations since `install`. */
  readonly total: () => number
  /** The same, by op code. */
  readonly byOp: () => Readonly<Record<string, number>>
}

let installed: OpCounter | undefined

/** Wraps the handlers once per process; later calls return the same counter. */
export const install = (): OpCounter => {
  if (installed !== undefined) return installed
  // The prototype of every fiber: the one class the run loop calls `this[op._op](op)` on.
  const fiber = Effect.runFork(Effect.void)
  const proto = Object.getPrototypeOf(fiber) as Record<string, unknown>
  const counts: Record<string, number> = {}
  let total = 0
  for (const name of Object.getOwnPropertyNames(proto)) {
    const handler = proto[name]
    // Op codes are the capitalized members (`Sync`, `OnSuccess`, …); methods are lower case.
    if (!/^[A-Z]/.test(name) || typeof handler !== "function") continue
    counts[name] = 0
    proto[name] = function(this: unknown, op: unknown) {
      total++
      counts[name]!++
      return handler.call(this, op)
    }
  }
  installed = { total: () => total, byOp: () => ({ ...counts }) }
  return installed
}

/** `after - before` by op code, the non-zero ones, largest first. */
export const diff = (
  before: Readonly<Record<string, number>>,
  after: Readonly<Record<string, number>>
): ReadonlyArray<readonly [string, number]> =>
  Object.entries(after)
    .map(([op, n]) => [op, n - (before[op] ?? 0)] as const)
    .filter(([, n]) => n !== 0)
    .sort((a, b) => b[1] - a[1])
