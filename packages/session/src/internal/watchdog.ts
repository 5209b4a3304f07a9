/**
 * The silence watchdog. Silence counts only while the host waits on the CLI —
 * a turn is live or a control request is unanswered — and not while the CLI
 * waits on the host (a permission being decided): an idle session between
 * turns is quiet by right.
 */
import { Clock, Duration, Effect, Ref } from "effect"

export interface Options {
  readonly limit: Duration.DurationInput
  /** When the CLI last printed anything. */
  readonly lastSeenAt: Effect.Effect<number>
  /** Whether the host now waits on the CLI. */
  readonly waiting: Effect.Effect<boolean>
  /** Called once, with the silence measured, when it passes the limit. */
  readonly onSilent: (silentMillis: number) => Effect.Effect<void>
}

/** Checks four times per limit; returns once it fired. */
export const run = (options: Options): Effect.Effect<void> =>
  Effect.gen(function*() {
    const limit = Duration.toMillis(Duration.decode(options.limit))
    const tick = Math.max(1, limit / 4)
    // Silence is measured from the later of the CLI's last word and the start of the wait.
    const waitingSince = yield* Ref.make<number | undefined>(undefined)
    const check = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      if (!(yield* options.waiting)) return yield* Ref.set(waitingSince, undefined).pipe(Effect.as(false))
      const since = yield* Ref.updateAndGet(waitingSince, (t) => t ?? now - tick)
      const silent = now - Math.max(yield* options.lastSeenAt, since ?? now)
      if (silent <= limit) return false
      yield* options.onSilent(silent)
      return true
    })
    yield* Effect.sleep(Duration.millis(tick)).pipe(
      Effect.zipRight(check),
      Effect.repeat({ until: (fired) => fired })
    )
  })
