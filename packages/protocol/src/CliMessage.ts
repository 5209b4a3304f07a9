/**
 * Messages the Claude Code CLI writes on stdout in stream-json mode.
 *
 * Each schema checks the fields a host relies on and lets the rest through:
 * excess fields are kept, and enumerations the CLI extends between releases
 * (statuses, levels, stop reasons) are open strings.
 */
import * as Schema from "effect/Schema"
import * as Anthropic from "./Anthropic.js"
import * as Control from "./Control.js"
import * as Lenient from "./Lenient.js"
import { JsonObject, OtherTag, StringArray } from "./Json.js"

const optional = Schema.optional
const NullableString = Schema.NullOr(Schema.String)

/** Fields every message stamped by a session carries. */
const stamped = {
  uuid: Schema.String,
  session_id: Schema.String
} as const

const system = <const Subtype extends string, Fields extends Schema.Struct.Fields>(subtype: Subtype, fields: Fields) =>
  Schema.Struct({
    type: Schema.Literal("system"),
    subtype: Schema.Literal(subtype),
    ...stamped,
    ...fields
  })

// ---------------------------------------------------------------------------
// Conversation
// ---------------------------------------------------------------------------

export const Assistant = Schema.Struct({
  type: Schema.Literal("assistant"),
  message: Anthropic.Message,
  parent_tool_use_id: NullableString,
  error: optional(Schema.Unknown),
  ...stamped
})
export interface Assistant extends Schema.Schema.Type<typeof Assistant> {}

/** A user message the CLI echoes: tool results, replays, synthetic prompts. */
export const User = Schema.Struct({
  type: Schema.Literal("user"),
  message: Anthropic.MessageParam,
  parent_tool_use_id: NullableString,
  uuid: optional(Schema.String),
  session_id: optional(Schema.String),
  isSynthetic: optional(Schema.Boolean),
  isReplay: optional(Schema.Boolean),
  tool_use_result: optional(Schema.Unknown),
  timestamp: optional(Schema.String)
})
export interface User extends Schema.Schema.Type<typeof User> {}

const knownStreamEventTypes: ReadonlySet<string> = new Set([
  "message_start",
  "content_block_start",
  "content_block_delta",
  "content_block_stop",
  "message_delta",
  "message_stop",
  "ping",
  "error"
])

/** A stream event of a type the Messages API added later: kept, not rejected. */
export const OtherStreamEvent = Schema.Struct({
  type: OtherTag(knownStreamEventTypes, "stream event")
})
export interface OtherStreamEvent extends Schema.Schema.Type<typeof OtherStreamEvent> {}

/**
 * Narrows an event to the known Messages API events. The open `OtherStreamEvent`
 * has `type: string`, which defeats narrowing on `type` until this guard runs.
 */
export const isKnownStreamEvent = (
  event: Anthropic.MessageStreamEvent | OtherStreamEvent
): event is Anthropic.MessageStreamEvent => knownStreamEventTypes.has(event.type)

/** One raw Messages API event, sent only with `--include-partial-messages`. */
export const StreamEvent = Schema.Struct({
  type: Schema.Literal("stream_event"),
  event: Schema.Union(Anthropic.MessageStreamEvent, OtherStreamEvent),
  parent_tool_use_id: NullableString,
  ttft_ms: optional(Schema.Number),
  ...stamped
})
export interface StreamEvent extends Schema.Schema.Type<typeof StreamEvent> {}

// ---------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------

export const ModelUsage = Schema.Struct({
  inputTokens: Schema.Number,
  outputTokens: Schema.Number,
  cacheReadInputTokens: Schema.Number,
  cacheCreationInputTokens: Schema.Number,
  webSearchRequests: optional(Schema.Number),
  costUSD: Schema.Number,
  contextWindow: optional(Schema.Number),
  maxOutputTokens: optional(Schema.Number)
})
export interface ModelUsage extends Schema.Schema.Type<typeof ModelUsage> {}

export const PermissionDenial = Schema.Struct({
  tool_name: Schema.String,
  tool_use_id: Schema.String,
  tool_input: JsonObject
})
export interface PermissionDenial extends Schema.Schema.Type<typeof PermissionDenial> {}

const resultFields = {
  type: Schema.Literal("result"),
  duration_ms: Schema.Number,
  duration_api_ms: optional(Schema.Number),
  is_error: Schema.Boolean,
  num_turns: Schema.Number,
  stop_reason: optional(NullableString),
  total_cost_usd: Schema.Number,
  usage: Anthropic.Usage,
  modelUsage: Schema.Record({ key: Schema.String, value: ModelUsage }),
  permission_denials: optional(Schema.Array(PermissionDenial)),
  terminal_reason: optional(Schema.String),
  ...stamped
} as const

export const ResultSuccess = Schema.Struct({
  ...resultFields,
  subtype: Schema.Literal("success"),
  result: Schema.String,
  structured_output: optional(Schema.Unknown)
})
export interface ResultSuccess extends Schema.Schema.Type<typeof ResultSuccess> {}

export const resultErrorSubtypes = [
  "error_during_execution",
  "error_max_turns",
  "error_max_budget_usd",
  "error_max_structured_output_retries"
] as const

export const ResultError = Schema.Struct({
  ...resultFields,
  subtype: Schema.Literal(...resultErrorSubtypes),
  errors: optional(StringArray)
})
export interface ResultError extends Schema.Schema.Type<typeof ResultError> {}

export type Result = ResultSuccess | ResultError

// ---------------------------------------------------------------------------
// System messages
// ---------------------------------------------------------------------------

export const Init = system("init", {
  apiKeySource: Schema.String,
  claude_code_version: Schema.String,
  cwd: Schema.String,
  tools: StringArray,
  mcp_servers: Schema.Array(Schema.Struct({ name: Schema.String, status: Schema.String })),
  model: Schema.String,
  permissionMode: Control.PermissionMode,
  slash_commands: optional(StringArray),
  output_style: optional(Schema.String),
  agents: optional(StringArray),
  skills: optional(StringArray),
  plugins: optional(Schema.Array(Schema.Struct({ name: Schema.String, path: Schema.String })))
})
export interface Init extends Schema.Schema.Type<typeof Init> {}

/** `status: null` clears the status. */
export const Status = system("status", {
  status: NullableString,
  permissionMode: optional(Control.PermissionMode),
  compact_result: optional(Schema.String),
  compact_error: optional(Schema.String)
})
export interface Status extends Schema.Schema.Type<typeof Status> {}

export const CompactBoundary = system("compact_boundary", {
  compact_metadata: Schema.Struct({
    trigger: Schema.String,
    pre_tokens: Schema.Number,
    post_tokens: optional(Schema.Number),
    duration_ms: optional(Schema.Number)
  })
})
export interface CompactBoundary extends Schema.Schema.Type<typeof CompactBoundary> {}

export const ApiRetry = system("api_retry", {
  attempt: Schema.Number,
  max_retries: Schema.Number,
  retry_delay_ms: Schema.Number,
  error_status: Schema.NullOr(Schema.Number),
  error: optional(Schema.Unknown)
})
export interface ApiRetry extends Schema.Schema.Type<typeof ApiRetry> {}

const hookFields = { hook_id: Schema.String, hook_name: Schema.String, hook_event: Schema.String } as const

export const HookStarted = system("hook_started", hookFields)
export interface HookStarted extends Schema.Schema.Type<typeof HookStarted> {}

export const HookProgress = system("hook_progress", {
  ...hookFields,
  stdout: Schema.String,
  stderr: Schema.String,
  output: Schema.String
})
export interface HookProgress extends Schema.Schema.Type<typeof HookProgress> {}

export const HookResponse = system("hook_response", {
  ...hookFields,
  output: Schema.String,
  stdout: Schema.String,
  stderr: Schema.String,
  exit_code: optional(Schema.Number),
  outcome: Schema.String
})
export interface HookResponse extends Schema.Schema.Type<typeof HookResponse> {}

export const TaskUsage = Schema.Struct({
  total_tokens: Schema.Number,
  tool_uses: Schema.Number,
  duration_ms: Schema.Number
})
export interface TaskUsage extends Schema.Schema.Type<typeof TaskUsage> {}

export const TaskStarted = system("task_started", {
  task_id: Schema.String,
  tool_use_id: optional(Schema.String),
  description: Schema.String,
  task_type: optional(Schema.String),
  subagent_type: optional(Schema.String),
  is_backgrounded: optional(Schema.Boolean),
  parent_task_id: optional(Schema.String),
  prompt: optional(Schema.String)
})
export interface TaskStarted extends Schema.Schema.Type<typeof TaskStarted> {}

export const TaskProgress = system("task_progress", {
  task_id: Schema.String,
  tool_use_id: optional(Schema.String),
  description: Schema.String,
  usage: TaskUsage,
  last_tool_name: optional(Schema.String),
  summary: optional(Schema.String)
})
export interface TaskProgress extends Schema.Schema.Type<typeof TaskProgress> {}

export const TaskUpdated = system("task_updated", {
  task_id: Schema.String,
  patch: Schema.Struct({
    status: optional(Schema.String),
    description: optional(Schema.String),
    end_time: optional(Schema.Number),
    error: optional(Schema.String),
    is_backgrounded: optional(Schema.Boolean)
  })
})
export interface TaskUpdated extends Schema.Schema.Type<typeof TaskUpdated> {}

export const TaskNotification = system("task_notification", {
  task_id: Schema.String,
  tool_use_id: optional(Schema.String),
  status: Schema.String,
  output_file: Schema.String,
  summary: Schema.String,
  usage: optional(TaskUsage)
})
export interface TaskNotification extends Schema.Schema.Type<typeof TaskNotification> {}

export const BackgroundTask = Schema.Struct({
  task_id: Schema.String,
  task_type: Schema.String,
  description: Schema.String,
  subagent_type: optional(Schema.String),
  parent_task_id: optional(Schema.String)
})
export interface BackgroundTask extends Schema.Schema.Type<typeof BackgroundTask> {}

export const BackgroundTasksChanged = system("background_tasks_changed", {
  tasks: Schema.Array(BackgroundTask)
})
export interface BackgroundTasksChanged extends Schema.Schema.Type<typeof BackgroundTasksChanged> {}

/** `idle` is the authoritative end of work; a `result` is not. */
export const SessionStateChanged = system("session_state_changed", {
  state: Schema.String
})
export interface SessionStateChanged extends Schema.Schema.Type<typeof SessionStateChanged> {}

export const UiInvalidate = system("ui_invalidate", {})
export interface UiInvalidate extends Schema.Schema.Type<typeof UiInvalidate> {}

export const Informational = system("informational", {
  content: Schema.String,
  level: Schema.String,
  tool_use_id: optional(Schema.String)
})
export interface Informational extends Schema.Schema.Type<typeof Informational> {}

export const LocalCommandOutput = system("local_command_output", { content: Schema.String })
export interface LocalCommandOutput extends Schema.Schema.Type<typeof LocalCommandOutput> {}

export const Notification = system("notification", {
  key: Schema.String,
  text: Schema.String,
  priority: Schema.String
})
export interface Notification extends Schema.Schema.Type<typeof Notification> {}

export const PermissionDenied = system("permission_denied", {
  tool_name: Schema.String,
  tool_use_id: Schema.String,
  message: Schema.String
})
export interface PermissionDenied extends Schema.Schema.Type<typeof PermissionDenied> {}

export const ThinkingTokens = system("thinking_tokens", {
  estimated_tokens: Schema.Number,
  estimated_tokens_delta: Schema.Number
})
export interface ThinkingTokens extends Schema.Schema.Type<typeof ThinkingTokens> {}

export const ControlRequestProgress = system("control_request_progress", {
  request_id: Schema.String,
  status: Schema.String
})
export interface ControlRequestProgress extends Schema.Schema.Type<typeof ControlRequestProgress> {}

export const FilesPersisted = system("files_persisted", {
  files: Schema.Array(Schema.Struct({ filename: Schema.String, file_id: Schema.String })),
  failed: Schema.Array(Schema.Struct({ filename: Schema.String, error: Schema.String })),
  processed_at: Schema.String
})
export interface FilesPersisted extends Schema.Schema.Type<typeof FilesPersisted> {}

export const CommandsChanged = system("commands_changed", { commands: Schema.Array(Schema.Unknown) })
export interface CommandsChanged extends Schema.Schema.Type<typeof CommandsChanged> {}

export const ElicitationComplete = system("elicitation_complete", {
  mcp_server_name: Schema.String,
  elicitation_id: Schema.String
})
export interface ElicitationComplete extends Schema.Schema.Type<typeof ElicitationComplete> {}

export const MemoryRecall = system("memory_recall", {
  mode: Schema.String,
  memories: Schema.Array(Schema.Struct({ path: Schema.String, scope: Schema.String }))
})
export interface MemoryRecall extends Schema.Schema.Type<typeof MemoryRecall> {}

export const PluginInstall = system("plugin_install", { status: Schema.String })
export interface PluginInstall extends Schema.Schema.Type<typeof PluginInstall> {}

export const ModelRefusalFallback = system("model_refusal_fallback", {
  original_model: Schema.String,
  fallback_model: Schema.String,
  content: Schema.String
})
export interface ModelRefusalFallback extends Schema.Schema.Type<typeof ModelRefusalFallback> {}

export const ModelRefusalNoFallback = system("model_refusal_no_fallback", {
  original_model: Schema.String,
  content: Schema.String
})
export interface ModelRefusalNoFallback extends Schema.Schema.Type<typeof ModelRefusalNoFallback> {}

export const MirrorError = system("mirror_error", { error: Schema.String })
export interface MirrorError extends Schema.Schema.Type<typeof MirrorError> {}

export const WorkerShuttingDown = system("worker_shutting_down", { reason: Schema.String })
export interface WorkerShuttingDown extends Schema.Schema.Type<typeof WorkerShuttingDown> {}

export const SessionWritesLost = system("session_writes_lost", {
  error_code: Schema.String,
  lost: StringArray
})
export interface SessionWritesLost extends Schema.Schema.Type<typeof SessionWritesLost> {}

export const System = {
  init: Init,
  status: Status,
  compact_boundary: CompactBoundary,
  api_retry: ApiRetry,
  hook_started: HookStarted,
  hook_progress: HookProgress,
  hook_response: HookResponse,
  task_started: TaskStarted,
  task_progress: TaskProgress,
  task_updated: TaskUpdated,
  task_notification: TaskNotification,
  background_tasks_changed: BackgroundTasksChanged,
  session_state_changed: SessionStateChanged,
  ui_invalidate: UiInvalidate,
  informational: Informational,
  local_command_output: LocalCommandOutput,
  notification: Notification,
  permission_denied: PermissionDenied,
  thinking_tokens: ThinkingTokens,
  control_request_progress: ControlRequestProgress,
  files_persisted: FilesPersisted,
  commands_changed: CommandsChanged,
  elicitation_complete: ElicitationComplete,
  memory_recall: MemoryRecall,
  plugin_install: PluginInstall,
  model_refusal_fallback: ModelRefusalFallback,
  model_refusal_no_fallback: ModelRefusalNoFallback,
  mirror_error: MirrorError,
  worker_shutting_down: WorkerShuttingDown,
  session_writes_lost: SessionWritesLost
} as const

export type SystemMessage = Schema.Schema.Type<(typeof System)[keyof typeof System]>

// ---------------------------------------------------------------------------
// Other top-level types
// ---------------------------------------------------------------------------

export const KeepAlive = Schema.Struct({ type: Schema.Literal("keep_alive") })
export interface KeepAlive extends Schema.Schema.Type<typeof KeepAlive> {}

export const ToolProgress = Schema.Struct({
  type: Schema.Literal("tool_progress"),
  tool_use_id: Schema.String,
  tool_name: Schema.String,
  parent_tool_use_id: NullableString,
  elapsed_time_seconds: Schema.Number,
  task_id: optional(Schema.String),
  ...stamped
})
export interface ToolProgress extends Schema.Schema.Type<typeof ToolProgress> {}

export const RateLimitEvent = Schema.Struct({
  type: Schema.Literal("rate_limit_event"),
  rate_limit_info: Schema.Struct({
    status: Schema.String,
    resetsAt: optional(Schema.Number),
    rateLimitType: optional(Schema.String),
    utilization: optional(Schema.Number)
  }),
  ...stamped
})
export interface RateLimitEvent extends Schema.Schema.Type<typeof RateLimitEvent> {}

export const PromptSuggestion = Schema.Struct({
  type: Schema.Literal("prompt_suggestion"),
  suggestion: Schema.String,
  ...stamped
})
export interface PromptSuggestion extends Schema.Schema.Type<typeof PromptSuggestion> {}

export const AuthStatus = Schema.Struct({
  type: Schema.Literal("auth_status"),
  isAuthenticating: Schema.Boolean,
  output: StringArray,
  error: optional(Schema.String),
  ...stamped
})
export interface AuthStatus extends Schema.Schema.Type<typeof AuthStatus> {}

export const ToolUseSummary = Schema.Struct({
  type: Schema.Literal("tool_use_summary"),
  summary: Schema.String,
  preceding_tool_use_ids: StringArray,
  ...stamped
})
export interface ToolUseSummary extends Schema.Schema.Type<typeof ToolUseSummary> {}

export const ConversationReset = Schema.Struct({
  type: Schema.Literal("conversation_reset"),
  new_conversation_id: Schema.String,
  trigger: optional(Schema.String),
  ...stamped
})
export interface ConversationReset extends Schema.Schema.Type<typeof ConversationReset> {}

export const ActiveGoal = Schema.Struct({
  type: Schema.Literal("active_goal"),
  value: Schema.NullOr(JsonObject),
  ...stamped
})
export interface ActiveGoal extends Schema.Schema.Type<typeof ActiveGoal> {}

// ---------------------------------------------------------------------------
// The union and its decoder
// ---------------------------------------------------------------------------

export type CliMessage =
  | Assistant
  | User
  | StreamEvent
  | Result
  | SystemMessage
  | Control.CliRequest
  | Control.ControlResponse
  | Control.CancelRequest
  | KeepAlive
  | ToolProgress
  | RateLimitEvent
  | PromptSuggestion
  | AuthStatus
  | ToolUseSummary
  | ConversationReset
  | ActiveGoal

export const decoder: Lenient.Decoder<CliMessage> = Lenient.make<CliMessage>({
  assistant: Lenient.schema(Assistant),
  user: Lenient.schema(User),
  stream_event: Lenient.schema(StreamEvent),
  result: Lenient.subtypes({
    success: ResultSuccess,
    error_during_execution: ResultError,
    error_max_turns: ResultError,
    error_max_budget_usd: ResultError,
    error_max_structured_output_retries: ResultError
  }),
  system: Lenient.subtypes(System),
  control_request: Lenient.subtypes(Control.CliRequests, Control.nestedSubtype("request")),
  control_response: Lenient.subtypes(
    { success: Control.SuccessResponse, error: Control.ErrorResponse },
    Control.nestedSubtype("response")
  ),
  control_cancel_request: Lenient.schema(Control.CancelRequest),
  keep_alive: Lenient.schema(KeepAlive),
  tool_progress: Lenient.schema(ToolProgress),
  rate_limit_event: Lenient.schema(RateLimitEvent),
  prompt_suggestion: Lenient.schema(PromptSuggestion),
  auth_status: Lenient.schema(AuthStatus),
  tool_use_summary: Lenient.schema(ToolUseSummary),
  conversation_reset: Lenient.schema(ConversationReset),
  active_goal: Lenient.schema(ActiveGoal)
})

/** Decode one stdout line. Never throws. */
export const decodeLine = (text: string, line = 0): Lenient.Decoded<CliMessage> => decoder.decodeLine(text, line)
