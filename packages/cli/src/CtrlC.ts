/**
 * Ctrl-C for a command that runs turns: the first press interrupts what is
 * guarded (a turn), the next one quits. Outside a guard a press quits at once.
 * Quitting interrupts the command's fiber, so every scope closes and the
 * session's finalizers stop the CLI: no process is left behind.
 */
import { Context, Deferred, Effect, Layer, Option, Ref, Runtime } from "effect"

export class CtrlC extends Context.Tag("@skein/cli/CtrlC")<CtrlC, {
  /** Runs `effect`; a first press meanwhile runs `onPress` instead of quitting. */
  readonly guard: <A, E, R>(effect: Effect.Effect<A, E, R>, onPress: Effect.Effect<void>) => Effect.Effect<A, E, R>
  /** Resolves at the press that quits. */
  readonly quit: Effect.Effect<void>
}>() {}

export const make = Effect.gen(function*() {
  const quit = yield* Deferred.make<void>()
  const armed = yield* Ref.make(Option.none<Effect.Effect<void>>())
  const runFork = Runtime.runFork(yield* Effect.runtime<never>())
  const press = Ref.getAndSet(armed, Option.none()).pipe(
    Effect.flatMap(Option.match({ onNone: () => Effect.asVoid(Deferred.succeed(quit, undefined)), onSome: (onPress) => onPress }))
  )
  const onSignal = () => {
    runFork(press)
  }
  yield* Effect.acquireRelease(
    Effect.sync(() => process.on("SIGINT", onSignal)),
    () => Effect.sync(() => process.removeListener("SIGINT", onSignal))
  )
  return CtrlC.of({
    guard: (effect, onPress) =>
      Effect.acquireUseRelease(Ref.set(armed, Option.some(onPress)), () => effect, () => Ref.set(armed, Option.none())),
    quit: Deferred.await(quit)
  })
})

export const layer: Layer.Layer<CtrlC> = Layer.scoped(CtrlC, make)
