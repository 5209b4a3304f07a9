/**
 * A one-line spinner on a terminal stream. It only ever draws on a line of
 * its own (the caller hides it before writing), and erases what it drew.
 */
import { Effect, Option, Ref, Schedule, type Scope } from "effect"

const frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]
const erase = "\r\x1b[2K"

export interface Spinner {
  /** Spins with `label` until `hide`. */
  readonly show: (label: string) => Effect.Effect<void>
  /** Erases the spinner's line, if it drew one. */
  readonly hide: Effect.Effect<void>
}

/** A spinner that does nothing: for a stream that is not a terminal. */
export const none: Spinner = { show: () => Effect.void, hide: Effect.void }

/** A spinner drawing on `stream` for the scope's life. */
export const make = (stream: NodeJS.WriteStream): Effect.Effect<Spinner, never, Scope.Scope> =>
  Effect.gen(function*() {
    const label = yield* Ref.make(Option.none<string>())
    const drawn = yield* Ref.make(false)
    const tick = yield* Ref.make(0)
    const draw = Effect.gen(function*() {
      const current = yield* Ref.get(label)
      if (Option.isNone(current)) return
      const frame = frames[(yield* Ref.getAndUpdate(tick, (n) => n + 1)) % frames.length]
      yield* Effect.sync(() => stream.write(`${erase}${frame} ${current.value}`))
      yield* Ref.set(drawn, true)
    })
    const hide = Effect.flatMap(Ref.getAndSet(drawn, false), (was) => was ? Effect.sync(() => stream.write(erase)) : Effect.void).pipe(
      Effect.zipLeft(Ref.set(label, Option.none()))
    )
    yield* Effect.forkScoped(Effect.repeat(draw, Schedule.spaced("80 millis")))
    yield* Effect.addFinalizer(() => hide)
    return { show: (text) => Effect.zipRight(Ref.set(label, Option.some(text)), draw), hide }
  })

/** A spinner on stderr when it is a terminal, else `none`. */
export const stderr: Effect.Effect<Spinner, never, Scope.Scope> = Effect.suspend(() =>
  process.stderr.isTTY === true ? make(process.stderr) : Effect.succeed(none)
)
