/**
 * Progress for anything that may take more than a second: a spinner on
 * stderr when it is a terminal, from the first second on; nothing otherwise,
 * so piped output and logs stay clean.
 */
import { Effect } from "effect"
import * as Spinner from "./internal/spinner.js"

/** Runs `effect`, spinning with `label` on a terminal once it has taken a second. */
export const withProgress = (label: string) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.scoped(Effect.gen(function*() {
    const spinner = yield* Spinner.stderr
    yield* Effect.forkScoped(Effect.delay(spinner.show(label), "1 second"))
    return yield* Effect.ensuring(effect, spinner.hide)
  }))
