/**
 * Answers the CLI's `can_use_tool` requests.
 *
 * A session always asks the CLI to send its permission questions over the bus
 * (`--permission-prompt-tool stdio`), so the host decides, never the CLI's own
 * non-interactive policy. The CLI waits for the answer, so a missing or slow
 * handler must never hang a turn: with no `Permissions` service the session
 * denies, with a message that names the missing handler (it shows in the tool
 * result the model sees and in the transcript), and a handler that outlives
 * its timeout is denied as well. Tools allowed up front (`allowedTools`) are
 * never asked about.
 */
import type { Control } from "@skein/protocol"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

export interface PermissionRequest {
  readonly sessionId: string | undefined
  readonly requestId: string
  readonly toolName: string
  readonly toolUseId: string
  readonly input: { readonly [key: string]: unknown }
  /** The CLI's raw request, with suggestions and the blocked path if any. */
  readonly request: Control.CanUseTool
}

export type PermissionDecision = Control.PermissionResult

export class Permissions extends Context.Tag("@skein/session/Permissions")<Permissions, {
  readonly canUseTool: (request: PermissionRequest) => Effect.Effect<PermissionDecision>
  /** Past this the request is denied. Default 5 minutes. */
  readonly timeout?: Duration.DurationInput | undefined
}>() {}

export const defaultTimeout: Duration.Duration = Duration.minutes(5)

export const allow = (options?: { readonly updatedInput?: { readonly [key: string]: unknown } }): PermissionDecision =>
  options?.updatedInput === undefined ? { behavior: "allow" } : { behavior: "allow", updatedInput: options.updatedInput }

export const deny = (message: string, options?: { readonly interrupt?: boolean }): PermissionDecision =>
  options?.interrupt === undefined ? { behavior: "deny", message } : { behavior: "deny", message, interrupt: options.interrupt }

export const make = (
  canUseTool: (request: PermissionRequest) => Effect.Effect<PermissionDecision>,
  options?: { readonly timeout?: Duration.DurationInput }
): Permissions["Type"] => ({ canUseTool, timeout: options?.timeout })

/** A policy from a function: handy for tests and simple hosts. */
export const layer = (
  canUseTool: (request: PermissionRequest) => Effect.Effect<PermissionDecision>,
  options?: { readonly timeout?: Duration.DurationInput }
): Layer.Layer<Permissions> => Layer.succeed(Permissions, make(canUseTool, options))

/** Allows tools by name and denies the rest. */
export const allowTools = (names: ReadonlyArray<string>): Layer.Layer<Permissions> =>
  layer((request) =>
    Effect.succeed(
      names.includes(request.toolName) ? allow() : deny(`${request.toolName} is not allowed by this host's policy`)
    )
  )
