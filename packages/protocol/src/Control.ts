/**
 * The control protocol multiplexed on the stream-json bus.
 *
 * Both sides send `control_request`s, correlated by `request_id`, and answer
 * with `control_response`. A side withdraws its own pending request with
 * `control_cancel_request`. The CLI *waits* for the host's answer, so every
 * request it sends must be answered, with an error if need be.
 */
import * as Schema from "effect/Schema"
import { JsonObject, StringArray } from "./Json.js"


/** Permission modes are an open set: new ones appear between releases. */
export const PermissionMode = Schema.String
/** Values known to the CLI 2.1 line. */
export type KnownPermissionMode = "default" | "acceptEdits" | "bypassPermissions" | "plan" | "dontAsk" | "auto"

// ---------------------------------------------------------------------------
// Permission rules and results
// ---------------------------------------------------------------------------

export const PermissionRule = Schema.Struct({
  toolName: Schema.String,
  ruleContent: Schema.optional(Schema.String)
})
export interface PermissionRule extends Schema.Schema.Type<typeof PermissionRule> {}

/** A change to permission rules, suggested by the CLI or returned by the host. */
export const PermissionUpdate = Schema.Struct({
  type: Schema.String,
  destination: Schema.optional(Schema.String),
  rules: Schema.optional(Schema.Array(PermissionRule)),
  behavior: Schema.optional(Schema.String),
  mode: Schema.optional(Schema.String),
  directories: Schema.optional(StringArray)
})
export interface PermissionUpdate extends Schema.Schema.Type<typeof PermissionUpdate> {}

export const PermissionAllow = Schema.Struct({
  behavior: Schema.Literal("allow"),
  updatedInput: Schema.optional(JsonObject),
  updatedPermissions: Schema.optional(Schema.Array(PermissionUpdate)),
  toolUseID: Schema.optional(Schema.String)
})
export interface PermissionAllow extends Schema.Schema.Type<typeof PermissionAllow> {}

export const PermissionDeny = Schema.Struct({
  behavior: Schema.Literal("deny"),
  message: Schema.String,
  interrupt: Schema.optional(Schema.Boolean),
  toolUseID: Schema.optional(Schema.String)
})
export interface PermissionDeny extends Schema.Schema.Type<typeof PermissionDeny> {}

/** The host's answer to `can_use_tool`. */
export const PermissionResult = Schema.Union(PermissionAllow, PermissionDeny)
export type PermissionResult = Schema.Schema.Type<typeof PermissionResult>

/** The host's answer to `hook_callback`: the JSON a command hook would print. */
export const HookOutput = Schema.Struct({
  continue: Schema.optional(Schema.Boolean),
  suppressOutput: Schema.optional(Schema.Boolean),
  stopReason: Schema.optional(Schema.String),
  decision: Schema.optional(Schema.String),
  systemMessage: Schema.optional(Schema.String),
  reason: Schema.optional(Schema.String),
  hookSpecificOutput: Schema.optional(JsonObject)
})
export interface HookOutput extends Schema.Schema.Type<typeof HookOutput> {}

/** The host's answer to `elicitation`. */
export const ElicitationResult = Schema.Struct({
  action: Schema.Literal("accept", "decline", "cancel"),
  content: Schema.optional(JsonObject)
})
export interface ElicitationResult extends Schema.Schema.Type<typeof ElicitationResult> {}

// ---------------------------------------------------------------------------
// Requests the CLI sends to the host
// ---------------------------------------------------------------------------

export const CanUseTool = Schema.Struct({
  subtype: Schema.Literal("can_use_tool"),
  tool_name: Schema.String,
  input: JsonObject,
  tool_use_id: Schema.String,
  permission_suggestions: Schema.optional(Schema.Array(PermissionUpdate)),
  blocked_path: Schema.optional(Schema.String),
  decision_reason: Schema.optional(Schema.String),
  title: Schema.optional(Schema.String),
  display_name: Schema.optional(Schema.String),
  description: Schema.optional(Schema.String),
  agent_id: Schema.optional(Schema.String)
})
export interface CanUseTool extends Schema.Schema.Type<typeof CanUseTool> {}

export const HookCallback = Schema.Struct({
  subtype: Schema.Literal("hook_callback"),
  callback_id: Schema.String,
  input: JsonObject,
  tool_use_id: Schema.optional(Schema.String)
})
export interface HookCallback extends Schema.Schema.Type<typeof HookCallback> {}

export const Elicitation = Schema.Struct({
  subtype: Schema.Literal("elicitation"),
  mcp_server_name: Schema.String,
  message: Schema.String,
  mode: Schema.optional(Schema.String),
  url: Schema.optional(Schema.String),
  elicitation_id: Schema.optional(Schema.String),
  requested_schema: Schema.optional(JsonObject)
})
export interface Elicitation extends Schema.Schema.Type<typeof Elicitation> {}

/** A JSON-RPC message for an SDK MCP server; sent by either side. */
export const McpMessage = Schema.Struct({
  subtype: Schema.Literal("mcp_message"),
  server_name: Schema.String,
  message: JsonObject
})
export interface McpMessage extends Schema.Schema.Type<typeof McpMessage> {}

export const RequestUserDialog = Schema.Struct({
  subtype: Schema.Literal("request_user_dialog"),
  dialog_kind: Schema.String,
  payload: JsonObject,
  tool_use_id: Schema.optional(Schema.String)
})
export interface RequestUserDialog extends Schema.Schema.Type<typeof RequestUserDialog> {}

// ---------------------------------------------------------------------------
// Requests the host sends to the CLI
// ---------------------------------------------------------------------------

/** Hook registration: which callbacks fire for which matcher. */
export const HookMatcher = Schema.Struct({
  matcher: Schema.optional(Schema.String),
  hookCallbackIds: StringArray,
  timeout: Schema.optional(Schema.Number)
})
export interface HookMatcher extends Schema.Schema.Type<typeof HookMatcher> {}

/** A custom subagent, as `initialize` carries it (and as the CLI lists it in `init`). */
export const AgentDefinition = Schema.Struct({
  description: Schema.String,
  prompt: Schema.String,
  tools: Schema.optional(StringArray),
  disallowedTools: Schema.optional(StringArray),
  model: Schema.optional(Schema.String)
})
export interface AgentDefinition extends Schema.Schema.Type<typeof AgentDefinition> {}

export const Initialize = Schema.Struct({
  subtype: Schema.Literal("initialize"),
  hooks: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Array(HookMatcher) })),
  sdkMcpServers: Schema.optional(StringArray),
  agents: Schema.optional(Schema.Record({ key: Schema.String, value: AgentDefinition })),
  systemPrompt: Schema.optional(StringArray),
  appendSystemPrompt: Schema.optional(Schema.String),
  jsonSchema: Schema.optional(JsonObject),
  title: Schema.optional(Schema.String)
})
export interface Initialize extends Schema.Schema.Type<typeof Initialize> {}

export const Interrupt = Schema.Struct({
  subtype: Schema.Literal("interrupt"),
  cancel_queued: Schema.optional(Schema.Boolean)
})
export interface Interrupt extends Schema.Schema.Type<typeof Interrupt> {}

export const SetPermissionMode = Schema.Struct({
  subtype: Schema.Literal("set_permission_mode"),
  mode: PermissionMode
})
export interface SetPermissionMode extends Schema.Schema.Type<typeof SetPermissionMode> {}

export const SetModel = Schema.Struct({
  subtype: Schema.Literal("set_model"),
  model: Schema.optional(Schema.NullOr(Schema.String))
})
export interface SetModel extends Schema.Schema.Type<typeof SetModel> {}

export const SetMaxThinkingTokens = Schema.Struct({
  subtype: Schema.Literal("set_max_thinking_tokens"),
  max_thinking_tokens: Schema.optional(Schema.NullOr(Schema.Number))
})
export interface SetMaxThinkingTokens extends Schema.Schema.Type<typeof SetMaxThinkingTokens> {}

export const McpStatus = Schema.Struct({
  subtype: Schema.Literal("mcp_status")
})
export interface McpStatus extends Schema.Schema.Type<typeof McpStatus> {}

export const McpSetServers = Schema.Struct({
  subtype: Schema.Literal("mcp_set_servers"),
  servers: Schema.Record({ key: Schema.String, value: JsonObject })
})
export interface McpSetServers extends Schema.Schema.Type<typeof McpSetServers> {}

export const StopTask = Schema.Struct({
  subtype: Schema.Literal("stop_task"),
  task_id: Schema.String
})
export interface StopTask extends Schema.Schema.Type<typeof StopTask> {}

export const GetContextUsage = Schema.Struct({
  subtype: Schema.Literal("get_context_usage"),
  detail: Schema.optional(Schema.String)
})
export interface GetContextUsage extends Schema.Schema.Type<typeof GetContextUsage> {}

export const RewindFiles = Schema.Struct({
  subtype: Schema.Literal("rewind_files"),
  user_message_id: Schema.String,
  dry_run: Schema.optional(Schema.Boolean)
})
export interface RewindFiles extends Schema.Schema.Type<typeof RewindFiles> {}

/** Read-only requests that make the CLI build part of its state; a warm pool sends them to warm a held process. */
export const GetSettings = Schema.Struct({
  subtype: Schema.Literal("get_settings")
})
export interface GetSettings extends Schema.Schema.Type<typeof GetSettings> {}

export const GetStatus = Schema.Struct({
  subtype: Schema.Literal("get_status")
})
export interface GetStatus extends Schema.Schema.Type<typeof GetStatus> {}

export const GetSkillsDialog = Schema.Struct({
  subtype: Schema.Literal("get_skills_dialog")
})
export interface GetSkillsDialog extends Schema.Schema.Type<typeof GetSkillsDialog> {}

/** "Someone is typing": between turns the CLI may ready its next request. Carries no text. */
export const PromptDraftActivity = Schema.Struct({
  subtype: Schema.Literal("prompt_draft_activity")
})
export interface PromptDraftActivity extends Schema.Schema.Type<typeof PromptDraftActivity> {}

// ---------------------------------------------------------------------------
// Envelopes
// ---------------------------------------------------------------------------

/** The `control_request` envelope around one request payload. */
export const envelope = <Fields extends Schema.Struct.Fields>(request: Schema.Struct<Fields>) =>
  Schema.Struct({
    type: Schema.Literal("control_request"),
    request_id: Schema.String,
    request
  })

export const CliRequests = {
  can_use_tool: envelope(CanUseTool),
  hook_callback: envelope(HookCallback),
  elicitation: envelope(Elicitation),
  mcp_message: envelope(McpMessage),
  request_user_dialog: envelope(RequestUserDialog)
} as const

export type CliRequestPayload = Schema.Schema.Type<(typeof CliRequests)[keyof typeof CliRequests]>["request"]

/** A request the CLI sends to the host. */
export interface CliRequest {
  readonly type: "control_request"
  readonly request_id: string
  readonly request: CliRequestPayload
}

export const HostRequests = {
  initialize: envelope(Initialize),
  interrupt: envelope(Interrupt),
  set_permission_mode: envelope(SetPermissionMode),
  set_model: envelope(SetModel),
  set_max_thinking_tokens: envelope(SetMaxThinkingTokens),
  mcp_status: envelope(McpStatus),
  mcp_set_servers: envelope(McpSetServers),
  mcp_message: envelope(McpMessage),
  stop_task: envelope(StopTask),
  get_context_usage: envelope(GetContextUsage),
  rewind_files: envelope(RewindFiles),
  get_settings: envelope(GetSettings),
  get_status: envelope(GetStatus),
  get_skills_dialog: envelope(GetSkillsDialog),
  prompt_draft_activity: envelope(PromptDraftActivity)
} as const

export type HostRequestPayload = Schema.Schema.Type<(typeof HostRequests)[keyof typeof HostRequests]>["request"]

/** A request the host sends to the CLI. */
export interface HostRequest {
  readonly type: "control_request"
  readonly request_id: string
  readonly request: HostRequestPayload
}

export const SuccessResponse = Schema.Struct({
  type: Schema.Literal("control_response"),
  response: Schema.Struct({
    subtype: Schema.Literal("success"),
    request_id: Schema.String,
    response: Schema.optional(JsonObject)
  })
})
export interface SuccessResponse extends Schema.Schema.Type<typeof SuccessResponse> {}

export const ErrorResponse = Schema.Struct({
  type: Schema.Literal("control_response"),
  response: Schema.Struct({
    subtype: Schema.Literal("error"),
    request_id: Schema.String,
    error: Schema.String
  })
})
export interface ErrorResponse extends Schema.Schema.Type<typeof ErrorResponse> {}

export type ControlResponse = SuccessResponse | ErrorResponse

export const CancelRequest = Schema.Struct({
  type: Schema.Literal("control_cancel_request"),
  request_id: Schema.String
})
export interface CancelRequest extends Schema.Schema.Type<typeof CancelRequest> {}

/** The subtype of a `control_request` or `control_response` lives one level down. */
export const nestedSubtype = (field: "request" | "response") => (json: { readonly [key: string]: unknown }): unknown => {
  const inner = json[field]
  return typeof inner === "object" && inner !== null ? Reflect.get(inner, "subtype") : undefined
}

// ---------------------------------------------------------------------------
// Constructors
// ---------------------------------------------------------------------------

export const request = (request_id: string, request: HostRequestPayload): HostRequest => ({
  type: "control_request",
  request_id,
  request
})

export const success = (request_id: string, response?: { readonly [key: string]: unknown }): SuccessResponse => ({
  type: "control_response",
  response: response === undefined
    ? { subtype: "success", request_id }
    : { subtype: "success", request_id, response }
})

export const error = (request_id: string, message: string): ErrorResponse => ({
  type: "control_response",
  response: { subtype: "error", request_id, error: message }
})

export const cancel = (request_id: string): CancelRequest => ({ type: "control_cancel_request", request_id })
