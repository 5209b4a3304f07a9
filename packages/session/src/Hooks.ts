/**
 * Hook callbacks answered by the host.
 *
 * Hooks are registered with the CLI through `initialize` as
 * `{matcher, hookCallbackIds}` per hook event; when one fires, the CLI sends a
 * `hook_callback` naming the id, and the session runs the matching handler.
 */
import type { Control } from "@skein/protocol"
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

export interface HookContext {
  readonly sessionId: string | undefined
  readonly toolUseId: string | undefined
}

export interface HookRegistration {
  /** The hook event: `PreToolUse`, `PostToolUse`, `UserPromptSubmit`, `Stop`, … */
  readonly event: string
  /** Tool name pattern for tool events; every occurrence when absent. */
  readonly matcher?: string | undefined
  /** Seconds the CLI waits for this hook. */
  readonly timeout?: number | undefined
  readonly handle: (input: { readonly [key: string]: unknown }, context: HookContext) => Effect.Effect<Control.HookOutput>
}

export class Hooks extends Context.Tag("@skein/session/Hooks")<Hooks, {
  readonly registrations: ReadonlyArray<HookRegistration>
}>() {}

export const layer = (registrations: ReadonlyArray<HookRegistration>): Layer.Layer<Hooks> =>
  Layer.succeed(Hooks, { registrations })
