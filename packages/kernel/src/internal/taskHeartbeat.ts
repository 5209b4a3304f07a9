/**
 * The heartbeat deadline of a spawned task: its work races a watchdog that
 * fails with `HeartbeatTimeout` once the last beat is older than the limit.
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Task from "../Task.js"
import type { Entry } from "./taskRegistry.js"

export const beat = (entry: Entry): Effect.Effect<void> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => (entry.lastBeat = now)))

/** Sleeps until the deadline the last beat set, again after each later beat; fails once one passes. */
export const watchdog = (entry: Entry, timeoutMillis: number): Effect.Effect<never, Task.HeartbeatTimeout> =>
  Effect.gen(function*() {
    for (;;) {
      const now = yield* Clock.currentTimeMillis
      const remaining = entry.lastBeat + timeoutMillis - now
      if (remaining <= 0) {
        return yield* new Task.HeartbeatTimeout({ id: entry.record.id, timeoutMillis })
      }
      yield* Effect.sleep(Duration.millis(remaining))
    }
  })

/** The task's own limit wins over the manager's; none, or an infinite one, means no deadline. */
export const limitOf = (
  own: Duration.DurationInput | undefined,
  fallback: Duration.Duration | undefined
): Duration.Duration | undefined => own === undefined ? fallback : Duration.decode(own)

/** `work`, failed with `HeartbeatTimeout` (and interrupted) if a deadline passes first. */
export const guard = <A, E, R>(
  work: Effect.Effect<A, E, R>,
  entry: Entry,
  limit: Duration.Duration | undefined
): Effect.Effect<A, E | Task.HeartbeatTimeout, R> =>
  limit === undefined || !Duration.isFinite(limit)
    ? work
    : Effect.raceFirst(work, watchdog(entry, Duration.toMillis(limit)))
