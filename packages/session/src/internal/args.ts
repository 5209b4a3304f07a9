/**
 * Session options to CLI flags, after the fixed bus flags.
 */
import { StreamJson } from "@skein/protocol"

export interface FlagOptions {
  readonly includePartialMessages?: boolean | undefined
  /**
   * Ask the host about permissions over the bus (`--permission-prompt-tool stdio`).
   * On by default: the host's `Permissions` service decides, and without one
   * every request is denied with a message saying so. `false` leaves the
   * decision to the CLI's own non-interactive policy.
   */
  readonly permissionPromptTool?: boolean | undefined
  readonly resume?: string | undefined
  /**
   * The new session's id (`--session-id`, a UUID). Without it, a new session
   * (no `resume`, no `continue`) gets a fresh one, so its id is known at start.
   */
  readonly sessionId?: string | undefined
  readonly forkSession?: boolean | undefined
  readonly continue?: boolean | undefined
  readonly model?: string | undefined
  readonly permissionMode?: string | undefined
  readonly allowedTools?: ReadonlyArray<string> | undefined
  readonly disallowedTools?: ReadonlyArray<string> | undefined
  readonly appendSystemPrompt?: string | undefined
  readonly bare?: boolean | undefined
  readonly settings?: string | undefined
  readonly maxTurns?: number | undefined
  readonly extraArgs?: ReadonlyArray<string> | undefined
}

export const build = (options: FlagOptions): ReadonlyArray<string> => {
  const args = [...StreamJson.busArgs]
  const flag = (name: string, on: boolean | undefined) => {
    if (on === true) args.push(name)
  }
  const value = (name: string, v: string | undefined) => {
    if (v !== undefined) args.push(name, v)
  }
  const list = (name: string, v: ReadonlyArray<string> | undefined) => {
    if (v !== undefined && v.length > 0) args.push(name, v.join(","))
  }
  flag("--include-partial-messages", options.includePartialMessages)
  if (options.permissionPromptTool === true) args.push("--permission-prompt-tool", "stdio")
  value("--resume", options.resume)
  value("--session-id", options.sessionId)
  flag("--fork-session", options.forkSession)
  flag("--continue", options.continue)
  value("--model", options.model)
  value("--permission-mode", options.permissionMode)
  list("--allowedTools", options.allowedTools)
  list("--disallowedTools", options.disallowedTools)
  value("--append-system-prompt", options.appendSystemPrompt)
  flag("--bare", options.bare)
  value("--settings", options.settings)
  value("--max-turns", options.maxTurns === undefined ? undefined : String(options.maxTurns))
  if (options.extraArgs !== undefined) args.push(...options.extraArgs)
  return args
}
