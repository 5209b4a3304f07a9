/**
 * Where turns begin and end when the input is CLI messages alone (a capture,
 * a transcript replay): `@skein/session`'s `TurnTracker`, the same rules the
 * live session runs, fed `Message` inputs only. With no host sends every turn
 * is the CLI's own (`origin: "cli"`), which is all the canonical events need
 * (busy, idle). Its timers never fire here: a turn still waiting at the end of
 * the input is closed by the translator's `End`.
 */
import type { CliMessage } from "@skein/protocol"
import * as TurnTracker from "@skein/session/TurnTracker"

export type Output =
  | { readonly _tag: "TurnStarted"; readonly turn: number; readonly origin: TurnTracker.Origin }
  | { readonly _tag: "TurnEnded"; readonly turn: number; readonly origin: TurnTracker.Origin; readonly interrupted: boolean }

export type State = TurnTracker.State

export const initial = (): State => TurnTracker.initial()

const none: ReadonlyArray<Output> = []

export const step = (state: State, message: CliMessage.CliMessage): readonly [State, ReadonlyArray<Output>] => {
  const [next, outputs] = TurnTracker.step(state, { _tag: "Message", message })
  // Most messages neither start nor end a turn.
  if (outputs.length === 0) return [next, none]
  const boundaries: Array<Output> = []
  for (const output of outputs) {
    if (output._tag === "TurnStarted") {
      boundaries.push({ _tag: "TurnStarted", turn: output.turn, origin: output.origin })
    } else if (output._tag === "TurnEnded") {
      boundaries.push({ _tag: "TurnEnded", turn: output.turn, origin: output.origin, interrupted: output.interrupted })
    }
  }
  return [next, boundaries]
}
