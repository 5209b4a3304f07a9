/**
 * Answers MCP servers' elicitation requests relayed by the CLI. The default
 * declines: a host that has no one to ask must not leave the CLI waiting.
 */
import type { Control } from "@skein/protocol"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

export class Elicitation extends Context.Tag("@skein/session/Elicitation")<Elicitation, {
  readonly elicit: (request: Control.Elicitation) => Effect.Effect<Control.ElicitationResult>
}>() {}

export const decline: Elicitation["Type"] = { elicit: () => Effect.succeed({ action: "decline" }) }

export const layerDecline: Layer.Layer<Elicitation> = Layer.succeed(Elicitation, decline)

export const layer = (
  elicit: (request: Control.Elicitation) => Effect.Effect<Control.ElicitationResult>
): Layer.Layer<Elicitation> => Layer.succeed(Elicitation, { elicit })
