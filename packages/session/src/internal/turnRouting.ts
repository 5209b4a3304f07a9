/**
 * Which turn each event of a read belongs to: the one live when it came,
 * else the one it started. Most events of a read change no boundary: those
 * are stepped and queued in a plain loop, with an effect only for the
 * outputs of an event that moves one (a turn starts or ends), after which
 * the rest of the read goes on against the turn those outputs left live.
 */
import { Effect } from "effect"
import type { SessionEvent } from "../Turn.js"

export interface Ops<R, O> {
  /** The tracker's step for the event (none for an event that is not a message). */
  readonly step: (event: SessionEvent) => ReadonlyArray<O>
  /** The turn live now. */
  readonly current: () => R | undefined
  readonly offer: (record: R, event: SessionEvent) => void
  /** Carries the outputs out: may start or end the live turn. */
  readonly apply: (outputs: ReadonlyArray<O>) => Effect.Effect<void>
}

export const routeEvents = <R, O>(ops: Ops<R, O>) => {
  const from = (events: ReadonlyArray<SessionEvent>, start: number): Effect.Effect<void> =>
    Effect.suspend(() => {
      for (let i = start; i < events.length; i++) {
        const event = events[i]!
        const prior = ops.current()
        const outputs = ops.step(event)
        if (prior !== undefined) ops.offer(prior, event)
        if (outputs.length === 0) continue
        const applied = prior !== undefined ? ops.apply(outputs) : Effect.zipRight(
          ops.apply(outputs),
          Effect.sync(() => {
            const started = ops.current()
            if (started !== undefined) ops.offer(started, event)
          })
        )
        return Effect.zipRight(applied, from(events, i + 1))
      }
      return Effect.void
    })
  return (events: ReadonlyArray<SessionEvent>): Effect.Effect<void> => from(events, 0)
}
