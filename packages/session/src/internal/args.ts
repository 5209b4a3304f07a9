/**
 * Session options to CLI flags. The bus flags are fixed: stream-json both
 * ways, and `--verbose`, which stream-json output requires.
 */
export interface FlagOptions {
  readonly includePartialMessages?: boolean | undefined
  readonly permissionPromptTool?: boolean | undefined
  readonly resume?: string | undefined
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

export const busArgs: ReadonlyArray<string> = [
  "-p",
  "--output-format",
  "stream-json",
  "--input-format",
  "stream-json",
  "--verbose"
]

export const build = (options: FlagOptions): ReadonlyArray<string> => {
  const args = [...busArgs]
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
