/**
 * Realistic stream-json stdout messages for FakeCli scenarios. Field names
 * follow Claude Code 2.1.x; values are plausible, not measured.
 */

export const fakeVersion = "2.1.332"
export const fakeModel = "claude-sonnet-4-5-20250929"

/** Deterministic ids, so scenario output is stable across runs. */
export const makeIds = (sessionId: string) => {
  let n = 0
  return {
    sessionId,
    uuid: () => {
      n += 1
      return `00000000-0000-4000-8000-${n.toString(16).padStart(12, "0")}`
    }
  }
}
export type Ids = ReturnType<typeof makeIds>

const usage = (input: number, output: number) => ({
  input_tokens: input,
  cache_creation_input_tokens: 0,
  cache_read_input_tokens: 0,
  output_tokens: output,
  server_tool_use: { web_search_requests: 0, web_fetch_requests: 0 },
  service_tier: "standard"
})

export const systemInit = (ids: Ids, cwd: string) => ({
  type: "system",
  subtype: "init",
  cwd,
  session_id: ids.sessionId,
  tools: ["Bash", "Edit", "Glob", "Grep", "Read", "Task", "Write"],
  mcp_servers: [],
  model: fakeModel,
  permissionMode: "default",
  slash_commands: ["compact", "context", "cost"],
  apiKeySource: "ANTHROPIC_API_KEY",
  claude_code_version: fakeVersion,
  output_style: "default",
  agents: ["general-purpose"],
  skills: [],
  plugins: [],
  capabilities: ["interrupt_receipt_v1"],
  uuid: ids.uuid()
})

const assistant = (ids: Ids, content: ReadonlyArray<unknown>, stopReason: string | null) => ({
  type: "assistant",
  message: {
    id: `msg_${ids.uuid().slice(-12)}`,
    type: "message",
    role: "assistant",
    model: fakeModel,
    content,
    stop_reason: stopReason,
    stop_sequence: null,
    usage: usage(120, 24)
  },
  parent_tool_use_id: null,
  session_id: ids.sessionId,
  uuid: ids.uuid()
})

export const assistantText = (ids: Ids, text: string) => assistant(ids, [{ type: "text", text }], "end_turn")

export const assistantToolUse = (ids: Ids, toolUseId: string, name: string, input: Record<string, unknown>) =>
  assistant(ids, [{ type: "tool_use", id: toolUseId, name, input }], "tool_use")

export const userToolResult = (ids: Ids, toolUseId: string, content: string, isError: boolean) => ({
  type: "user",
  message: {
    role: "user",
    content: [{ type: "tool_result", tool_use_id: toolUseId, content, is_error: isError }]
  },
  parent_tool_use_id: null,
  session_id: ids.sessionId,
  uuid: ids.uuid()
})

export const result = (
  ids: Ids,
  options: {
    readonly subtype: "success" | "error_during_execution"
    readonly result?: string
    readonly numTurns: number
    readonly durationMs: number
    readonly costUsd: number
  }
) => {
  const input = 120 * options.numTurns
  const output = 24 * options.numTurns
  const common = {
    type: "result",
    subtype: options.subtype,
    is_error: options.subtype !== "success",
    duration_ms: options.durationMs,
    duration_api_ms: Math.round(options.durationMs * 0.8),
    num_turns: options.numTurns,
    stop_reason: options.subtype === "success" ? "end_turn" : null,
    total_cost_usd: options.costUsd,
    usage: usage(input, output),
    modelUsage: {
      [fakeModel]: {
        inputTokens: input,
        outputTokens: output,
        cacheReadInputTokens: 0,
        cacheCreationInputTokens: 0,
        webSearchRequests: 0,
        costUSD: options.costUsd,
        contextWindow: 200000,
        maxOutputTokens: 64000
      }
    },
    permission_denials: [],
    session_id: ids.sessionId,
    uuid: ids.uuid()
  }
  return options.subtype === "success"
    ? { ...common, result: options.result ?? "" }
    : { ...common, errors: [options.result ?? "turn aborted"] }
}

export const taskStarted = (ids: Ids, taskId: string, toolUseId: string, description: string, prompt: string) => ({
  type: "system",
  subtype: "task_started",
  task_id: taskId,
  tool_use_id: toolUseId,
  description,
  task_type: "local_agent",
  subagent_type: "general-purpose",
  is_backgrounded: true,
  spawn_depth: 1,
  prompt,
  session_id: ids.sessionId,
  uuid: ids.uuid()
})

export const taskNotification = (ids: Ids, taskId: string, toolUseId: string, summary: string, outputFile: string) => ({
  type: "system",
  subtype: "task_notification",
  task_id: taskId,
  tool_use_id: toolUseId,
  status: "completed",
  output_file: outputFile,
  summary,
  usage: { total_tokens: 1830, tool_uses: 2, duration_ms: 2400 },
  session_id: ids.sessionId,
  uuid: ids.uuid()
})

export const sessionStateChanged = (ids: Ids, state: "idle" | "running" | "requires_action") => ({
  type: "system",
  subtype: "session_state_changed",
  state,
  session_id: ids.sessionId,
  uuid: ids.uuid()
})

export const canUseTool = (requestId: string, toolUseId: string, toolName: string, input: Record<string, unknown>) => ({
  type: "control_request",
  request_id: requestId,
  request: {
    subtype: "can_use_tool",
    tool_name: toolName,
    input,
    tool_use_id: toolUseId,
    permission_suggestions: [],
    decision_reason_type: "mode"
  }
})

export const controlCancel = (requestId: string) => ({ type: "control_cancel_request", request_id: requestId })

/** What the real CLI answers to `initialize`, trimmed to its required fields. */
export const initializeResponse = (requestId: string) => ({
  type: "control_response",
  response: {
    subtype: "success",
    request_id: requestId,
    response: {
      commands: [{ name: "compact", description: "Clear history but keep a summary", argumentHint: "" }],
      agents: [{ name: "general-purpose", description: "General-purpose agent" }],
      output_style: "default",
      available_output_styles: ["default"],
      models: [{ value: "default", displayName: "Default", description: "Default model" }],
      account: { apiKeySource: "ANTHROPIC_API_KEY", apiProvider: "firstParty" }
    },
    pending_permission_requests: [],
    pending_user_dialog_requests: []
  }
})

export const interruptResponse = (requestId: string) => ({
  type: "control_response",
  response: { subtype: "success", request_id: requestId, response: { still_queued: [] } }
})
