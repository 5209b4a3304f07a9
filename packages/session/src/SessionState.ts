/**
 * A session's observable state, in the three layers of the CLI's own design:
 * identity and counters (process state), app state (mode, model, MCP servers,
 * tasks, pending permissions, status), and liveness. UI state stays with the
 * host's client.
 *
 * `apply` folds one stdout message into the state; it is pure, so the same
 * fold can rebuild a state from an event log.
 */
import type { CliMessage } from "@skein/protocol"

export type Status = "starting" | "idle" | "running" | "requires_action" | "exited"

export interface Counters {
  /** The CLI's cumulative cost for this process, from the latest `result`. */
  readonly costUsd: number
  readonly inputTokens: number
  readonly outputTokens: number
  readonly cacheReadInputTokens: number
  readonly cacheCreationInputTokens: number
  /** `result` messages seen. */
  readonly results: number
  /** Per model, cumulative, from the latest `result`. */
  readonly modelUsage: { readonly [model: string]: CliMessage.ModelUsage }
}

export interface BackgroundTask {
  readonly taskId: string
  readonly taskType: string
  readonly description: string
  readonly status: string
}

export interface PendingPermission {
  readonly requestId: string
  readonly toolName: string
  readonly toolUseId: string
  readonly input: { readonly [key: string]: unknown }
}

export interface McpServer {
  readonly name: string
  readonly status: string
}

export interface SessionState {
  // identity
  readonly sessionId: string | undefined
  /** The session this one was resumed or forked from. */
  readonly parentSessionId: string | undefined
  readonly cwd: string
  readonly transcriptPath: string | undefined
  readonly counters: Counters
  // app state
  readonly status: Status
  readonly model: string | undefined
  readonly permissionMode: string | undefined
  readonly tools: ReadonlyArray<string>
  readonly mcpServers: ReadonlyArray<McpServer>
  readonly backgroundTasks: ReadonlyArray<BackgroundTask>
  readonly pendingPermissions: ReadonlyArray<PendingPermission>
  /** The last `system/status` (`requesting`, `compacting`, or null when cleared). */
  readonly lastStatus: string | null
  /** Host-side compaction (`@skein/compact`), where a host compacts this session. */
  readonly compaction?: CompactionState | undefined
  // liveness
  readonly lastSeenAt: number
  readonly pid: number | undefined
}

/**
 * A host's compaction of the session, beside the CLI's own `compacting`
 * status: the host ends the CLI for a pass, so the CLI cannot report it.
 */
export interface CompactionState {
  /** A pass holds the session (its CLI is ended or about to be). */
  readonly compacting: boolean
  /** How the last pass ended: `compacted`, `declined: <why>`, or `failed`. */
  readonly lastOutcome: string | undefined
  /** Automatic compaction has stopped after repeated failures. */
  readonly breakerOpen: boolean
}

export const idleCompaction: CompactionState = { compacting: false, lastOutcome: undefined, breakerOpen: false }

export const emptyCounters: Counters = {
  costUsd: 0,
  inputTokens: 0,
  outputTokens: 0,
  cacheReadInputTokens: 0,
  cacheCreationInputTokens: 0,
  results: 0,
  modelUsage: {}
}

export const initial = (options: { readonly cwd: string; readonly parentSessionId?: string | undefined }): SessionState => ({
  sessionId: undefined,
  parentSessionId: options.parentSessionId,
  cwd: options.cwd,
  transcriptPath: undefined,
  counters: emptyCounters,
  status: "starting",
  model: undefined,
  permissionMode: undefined,
  tools: [],
  mcpServers: [],
  backgroundTasks: [],
  pendingPermissions: [],
  lastStatus: null,
  lastSeenAt: 0,
  pid: undefined
})

const status = (state: string): Status | undefined =>
  state === "idle" || state === "running" || state === "requires_action" ? state : undefined

const addResult = (counters: Counters, result: CliMessage.Result): Counters => ({
  costUsd: result.total_cost_usd,
  inputTokens: counters.inputTokens + result.usage.input_tokens,
  outputTokens: counters.outputTokens + result.usage.output_tokens,
  cacheReadInputTokens: counters.cacheReadInputTokens + (result.usage.cache_read_input_tokens ?? 0),
  cacheCreationInputTokens: counters.cacheCreationInputTokens + (result.usage.cache_creation_input_tokens ?? 0),
  results: counters.results + 1,
  modelUsage: result.modelUsage
})

const upsertTask = (tasks: ReadonlyArray<BackgroundTask>, task: BackgroundTask): ReadonlyArray<BackgroundTask> =>
  tasks.some((t) => t.taskId === task.taskId)
    ? tasks.map((t) => t.taskId === task.taskId ? { ...t, ...task } : t)
    : [...tasks, task]

const terminalTaskStatuses = new Set(["completed", "failed", "killed", "stopped"])

/**
 * `apply` over the messages of one read of stdout, in order. Only results and
 * system messages change more than `lastSeenAt`, so the rest cost no copy of
 * the state (in a delta storm that was one copy per streamed delta), and
 * `lastSeenAt` is set once for the read: one copy per message that changes
 * something, plus that one.
 */
export const applyAll = (state: SessionState, messages: Iterable<CliMessage.CliMessage>, now: number): SessionState => {
  let next = state
  for (const message of messages) {
    if (message.type === "result" || message.type === "system") next = change(next, message)
  }
  return { ...next, lastSeenAt: now }
}

/** Fold one stdout message into the state. */
export const apply = (state: SessionState, message: CliMessage.CliMessage, now: number): SessionState => ({
  ...change(state, message),
  lastSeenAt: now
})

/** What the message changes, besides `lastSeenAt`: the same state when nothing. */
const change = (state: SessionState, message: CliMessage.CliMessage): SessionState => {
  switch (message.type) {
    case "result":
      return { ...state, counters: addResult(state.counters, message) }
    case "system":
      switch (message.subtype) {
        case "init":
          return {
            ...state,
            sessionId: message.session_id,
            model: message.model,
            permissionMode: message.permissionMode,
            tools: message.tools,
            mcpServers: message.mcp_servers.map((s) => ({ name: s.name, status: s.status }))
          }
        case "session_state_changed": {
          const next = status(message.state)
          return next === undefined || next === state.status ? state : { ...state, status: next }
        }
        case "status":
          return {
            ...state,
            lastStatus: message.status,
            permissionMode: message.permissionMode ?? state.permissionMode
          }
        case "background_tasks_changed":
          return {
            ...state,
            backgroundTasks: message.tasks.map((t) => ({
              taskId: t.task_id,
              taskType: t.task_type,
              description: t.description,
              status: state.backgroundTasks.find((b) => b.taskId === t.task_id)?.status ?? "running"
            }))
          }
        case "task_started":
          return message.is_backgrounded === false ? state : {
            ...state,
            backgroundTasks: upsertTask(state.backgroundTasks, {
              taskId: message.task_id,
              taskType: message.task_type ?? "local_agent",
              description: message.description,
              status: "running"
            })
          }
        case "task_updated": {
          const next = message.patch.status
          if (next === undefined) return state
          return {
            ...state,
            backgroundTasks: terminalTaskStatuses.has(next)
              ? state.backgroundTasks.filter((t) => t.taskId !== message.task_id)
              : state.backgroundTasks.map((t) => t.taskId === message.task_id ? { ...t, status: next } : t)
          }
        }
        case "task_notification":
          return { ...state, backgroundTasks: state.backgroundTasks.filter((t) => t.taskId !== message.task_id) }
        default:
          return state
      }
    default:
      return state
  }
}
