/**
 * The pure parts of a forked worker: its CLI options, its agent id, and how
 * its events become sidechain entries and output lines.
 */
import type { Anthropic, CliMessage, Transcript } from "@skein/protocol"
import * as Crypto from "node:crypto"
import type { SessionOptions } from "../Session.js"
import type { SessionEvent } from "../Turn.js"

/** What a fork may set of its CLI's flags. */
export interface FlagOverrides {
  readonly model?: string | undefined
  readonly permissionMode?: string | undefined
  readonly allowedTools?: ReadonlyArray<string> | undefined
  readonly disallowedTools?: ReadonlyArray<string> | undefined
  readonly tools?: ReadonlyArray<string> | undefined
  readonly maxTurns?: number | undefined
}

/**
 * The worker's launch: the parent's (same CLI, environment, config folder,
 * system prompt and tools, so the cache prefix matches) resumed as a fork
 * under a session id chosen here, so the id is known before the process runs.
 */
export const sessionOptions = (
  launch: SessionOptions,
  overrides: FlagOverrides,
  ids: { readonly parentSessionId: string; readonly sessionId: string }
): SessionOptions => ({
  // Picked field by field: anything else of the parent's (an event log, say) stays the parent's.
  cwd: launch.cwd,
  executable: launch.executable,
  executableArgs: launch.executableArgs,
  env: launch.env,
  envMode: launch.envMode,
  configDir: launch.configDir,
  requestTimeout: launch.requestTimeout,
  silenceTimeout: launch.silenceTimeout,
  interruptSettle: launch.interruptSettle,
  taskSettle: launch.taskSettle,
  stopTimeouts: launch.stopTimeouts,
  includePartialMessages: launch.includePartialMessages,
  appendSystemPrompt: launch.appendSystemPrompt,
  systemPrompt: launch.systemPrompt,
  agents: launch.agents,
  outputSchema: launch.outputSchema,
  bare: launch.bare,
  settings: launch.settings,
  resume: ids.parentSessionId,
  forkSession: true,
  model: overrides.model ?? launch.model,
  permissionMode: overrides.permissionMode ?? launch.permissionMode,
  allowedTools: overrides.allowedTools ?? launch.allowedTools,
  disallowedTools: overrides.disallowedTools ?? launch.disallowedTools,
  maxTurns: overrides.maxTurns,
  extraArgs: [
    ...(launch.extraArgs ?? []),
    "--session-id",
    ids.sessionId,
    ...(overrides.tools === undefined ? [] : ["--tools", overrides.tools.join(",")])
  ]
})

/** A label as it may appear in a file name: letters, digits, `_` and `-`. */
export const fileSafe = (label: string): string => {
  const safe = label.replace(/[^A-Za-z0-9_-]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 64)
  return safe.length === 0 ? "worker" : safe
}

/** `<label>-<uuid>`, the name of the worker's sidechain. */
export const agentId = (label: string): string => `${fileSafe(label)}-${Crypto.randomUUID()}`

export const uuid = (): string => Crypto.randomUUID()

/** The fields every sidechain entry carries. */
export interface ChainContext {
  readonly parentSessionId: string
  readonly agentId: string
  readonly cwd: string
}

/** The prompt as the sidechain's first entry: stream-json does not echo it. */
export const promptEntry = (
  context: ChainContext,
  prompt: string | ReadonlyArray<Anthropic.ContentBlock>,
  at: { readonly uuid: string; readonly timestamp: string }
): Transcript.UserEntry => ({
  type: "user",
  uuid: at.uuid,
  parentUuid: null,
  isSidechain: true,
  sessionId: context.parentSessionId,
  agentId: context.agentId,
  cwd: context.cwd,
  timestamp: at.timestamp,
  message: { role: "user", content: prompt }
})

/**
 * A conversation message of the worker as a sidechain entry, chained after
 * `parentUuid`; everything else (system messages, results, stream events)
 * stays out of the chain.
 */
export const chainEntry = (
  context: ChainContext,
  message: CliMessage.CliMessage,
  at: { readonly parentUuid: string | null; readonly timestamp: string }
): Transcript.UserEntry | Transcript.AssistantEntry | undefined => {
  const common = {
    uuid: message.type === "assistant" || message.type === "user" ? message.uuid ?? uuid() : uuid(),
    parentUuid: at.parentUuid,
    isSidechain: true,
    sessionId: context.parentSessionId,
    agentId: context.agentId,
    cwd: context.cwd,
    timestamp: at.timestamp
  }
  switch (message.type) {
    case "assistant":
      return { type: "assistant", ...common, message: message.message }
    case "user":
      return {
        type: "user",
        ...common,
        message: message.message,
        ...(message.tool_use_result === undefined ? {} : { toolUseResult: message.tool_use_result })
      }
    default:
      return undefined
  }
}

/** One line of the task's output file: the message as the CLI printed it, or the diagnostic. */
export const outputLine = (event: SessionEvent): string => {
  switch (event._tag) {
    case "Message":
      return `${JSON.stringify(event.message)}\n`
    case "Unknown":
      return `${JSON.stringify(event.json)}\n`
    default:
      return `${JSON.stringify({ type: "skein_diagnostic", ...event })}\n`
  }
}
