/**
 * A scheduler for a process that hosts many sessions: ready fibers run for at
 * most a time slice, then the event loop gets its turn.
 *
 * Effect's default scheduler drains ready fibers in microtasks and yields to
 * the event loop only after 2,048 rounds, each of which runs every ready
 * fiber. One busy session never notices; fifty do, because a round then holds
 * hundreds of fibers and no timer or pipe is served until the rounds end. In
 * `bench/scale` (50 of 1,000 sessions running turns back to back) the
 * event-loop delay p99 was 44.9 ms under the default scheduler and 7.9 ms
 * under this one, with more turns per second, not fewer.
 *
 * A fiber still runs up to its `maxOpsBeforeYield` at a time, as under the
 * default scheduler; the slice bounds how many of them run in a row.
 */
import * as Layer from "effect/Layer"
import type * as Scheduler from "effect/Scheduler"
import { SlicedScheduler } from "./internal/slicedScheduler.js"

export interface Options {
  /** How long ready fibers run before the event loop gets a turn. Default 2 ms. */
  readonly sliceMillis?: number
  /** The clock the slice is measured on. Default `performance.now`. */
  readonly now?: () => number
}

export const defaultSliceMillis = 2

export const make = (options?: Options): Scheduler.Scheduler =>
  new SlicedScheduler(
    options?.sliceMillis ?? defaultSliceMillis,
    options?.now ?? (() => performance.now()),
    (drain) => setImmediate(drain)
  )

/** Run every effect this layer is provided to, and the fibers they fork, on a sliced scheduler. */
export const layer = (options?: Options): Layer.Layer<never> => Layer.setScheduler(make(options))
