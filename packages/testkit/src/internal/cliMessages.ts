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

// ---------------------------------------------------------------------------
// Background Bash tasks, as CLI 2.1.332 prints them
// ---------------------------------------------------------------------------

export interface BashTask {
  readonly taskId: string
  readonly runId: string
  readonly toolUseId: string
  readonly description: string
}

export const backgroundTasksChanged = (ids: Ids, tasks: ReadonlyArray<BashTask>) => ({
  type: "system",
  subtype: "background_tasks_changed",
  tasks: tasks.map((task) => ({
    task_id: task.taskId,
    run_id: task.runId,
    task_type: "local_bash",
    description: task.description
  })),
  uuid: ids.uuid(),
  session_id: ids.sessionId
})

export const bashTaskStarted = (ids: Ids, task: BashTask) => ({
  type: "system",
  subtype: "task_started",
  task_id: task.taskId,
  run_id: task.runId,
  tool_use_id: task.toolUseId,
  description: task.description,
  is_backgrounded: true,
  task_type: "local_bash",
  uuid: ids.uuid(),
  session_id: ids.sessionId
})

export const bashTaskOutputFile = (ids: Ids, task: BashTask) => `/tmp/fake-cli/${ids.sessionId}/tasks/${task.taskId}.output`

/** The tool_result of a `run_in_background` Bash call. */
export const bashBackgroundResult = (ids: Ids, task: BashTask) => ({
  type: "user",
  message: {
    role: "user",
    content: [{
      tool_use_id: task.toolUseId,
      type: "tool_result",
      content: `Command running in background with ID: ${task.taskId}. Output is being written to: ${
        bashTaskOutputFile(ids, task)
      }. You will be notified when it completes. To check interim output, use Read on that file path.`,
      is_error: false
    }]
  },
  parent_tool_use_id: null,
  session_id: ids.sessionId,
  uuid: ids.uuid(),
  tool_use_result: {
    stdout: "",
    stderr: "",
    interrupted: false,
    isImage: false,
    noOutputExpected: false,
    backgroundTaskId: task.taskId
  }
})

export const bashTaskUpdated = (ids: Ids, task: BashTask, status: "completed" | "failed" | "killed") => ({
  type: "system",
  subtype: "task_updated",
  task_id: task.taskId,
  run_id: task.runId,
  patch: { status, end_time: 1796019006560 },
  uuid: ids.uuid(),
  session_id: ids.sessionId
})

export const bashTaskNotification = (ids: Ids, task: BashTask) => ({
  type: "system",
  subtype: "task_notification",
  task_id: task.taskId,
  run_id: task.runId,
  tool_use_id: task.toolUseId,
  status: "completed",
  output_file: bashTaskOutputFile(ids, task),
  summary: `Background command "${task.description}" completed (exit code 0)`,
  uuid: ids.uuid(),
  session_id: ids.sessionId
})

// ---------------------------------------------------------------------------
// The 2.0 line (shapes of CLI 2.0.76): no session_state_changed, no task_*,
// fewer fields on init, can_use_tool and result
// ---------------------------------------------------------------------------

export const legacyVersion = "2.0.76"

export const legacySystemInit = (ids: Ids, cwd: string) => ({
  type: "system",
  subtype: "init",
  cwd,
  session_id: ids.sessionId,
  tools: ["Task", "TaskOutput", "Bash", "Glob", "Grep", "Read", "Edit", "Write", "KillShell"],
  mcp_servers: [],
  model: fakeModel,
  permissionMode: "default",
  slash_commands: ["compact", "context", "cost"],
  apiKeySource: "ANTHROPIC_API_KEY",
  claude_code_version: legacyVersion,
  output_style: "default",
  agents: ["general-purpose", "Explore", "Plan"],
  skills: [],
  plugins: [],
  uuid: ids.uuid()
})

export const legacyCanUseTool = (
  requestId: string,
  toolUseId: string,
  toolName: string,
  input: Record<string, unknown>
) => ({
  type: "control_request",
  request_id: requestId,
  request: {
    subtype: "can_use_tool",
    tool_name: toolName,
    input,
    permission_suggestions: [],
    tool_use_id: toolUseId
  }
})

/** A 2.0 result: no `stop_reason`, fewer `modelUsage` fields. */
export const legacyResult = (
  ids: Ids,
  options: { readonly result: string; readonly numTurns: number; readonly durationMs: number; readonly costUsd: number }
) => ({
  type: "result",
  subtype: "success",
  is_error: false,
  duration_ms: options.durationMs,
  duration_api_ms: Math.round(options.durationMs * 1.1),
  num_turns: options.numTurns,
  result: options.result,
  session_id: ids.sessionId,
  total_cost_usd: options.costUsd,
  usage: usage(120 * options.numTurns, 24 * options.numTurns),
  modelUsage: {
    [fakeModel]: {
      inputTokens: 120 * options.numTurns,
      outputTokens: 24 * options.numTurns,
      cacheReadInputTokens: 0,
      cacheCreationInputTokens: 0,
      webSearchRequests: 0,
      costUSD: options.costUsd,
      contextWindow: 200000
    }
  },
  permission_denials: [],
  uuid: ids.uuid()
})

/** A Bash tool_result with the CLI's `tool_use_result` detail. */
export const bashResult = (ids: Ids, toolUseId: string, stdout: string) => ({
  type: "user",
  message: { role: "user", content: [{ tool_use_id: toolUseId, type: "tool_result", content: stdout, is_error: false }] },
  parent_tool_use_id: null,
  session_id: ids.sessionId,
  uuid: ids.uuid(),
  tool_use_result: { stdout, stderr: "", interrupted: false, isImage: false }
})
