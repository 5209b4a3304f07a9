/** Hand-written stream-json lines in the shapes the CLI emits, for tests that need no capture. */
const sid = "6f1c2a3e-0000-4000-8000-000000000001"
const usage = { input_tokens: 12, output_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }

export const cliSamples: ReadonlyArray<unknown> = [
  {
    type: "system",
    subtype: "init",
    cwd: "/tmp/w",
    session_id: sid,
    tools: ["Bash", "Read"],
    mcp_servers: [],
    model: "claude-sonnet-4-5",
    permissionMode: "default",
    slash_commands: ["compact"],
    apiKeySource: "ANTHROPIC_API_KEY",
    claude_code_version: "2.1.332",
    output_style: "default",
    agents: [],
    skills: [],
    plugins: [],
    uuid: "u-1",
    fast_mode_state: "off"
  },
  {
    type: "stream_event",
    event: { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Hi 🧶" } },
    parent_tool_use_id: null,
    session_id: sid,
    uuid: "u-2"
  },
  {
    type: "assistant",
    message: {
      id: "msg_1",
      type: "message",
      role: "assistant",
      model: "claude-sonnet-4-5",
      content: [{ type: "text", text: "Hello" }, { type: "tool_use", id: "tu_1", name: "Bash", input: { command: "ls" } }],
      stop_reason: null,
      stop_sequence: null,
      usage
    },
    parent_tool_use_id: null,
    session_id: sid,
    uuid: "u-3"
  },
  {
    type: "user",
    message: { role: "user", content: [{ type: "tool_result", tool_use_id: "tu_1", content: "a.txt" }] },
    parent_tool_use_id: null,
    session_id: sid,
    uuid: "u-4",
    tool_use_result: { stdout: "a.txt", stderr: "", interrupted: false }
  },
  {
    type: "control_request",
    request_id: "req-1",
    request: { subtype: "can_use_tool", tool_name: "Bash", input: { command: "ls" }, tool_use_id: "tu_1" }
  },
  { type: "control_response", response: { subtype: "success", request_id: "init-1", response: { commands: [] } } },
  { type: "control_response", response: { subtype: "error", request_id: "x", error: "nope" } },
  { type: "control_cancel_request", request_id: "req-1" },
  { type: "keep_alive" },
  { type: "system", subtype: "session_state_changed", state: "running", session_id: sid, uuid: "u-5" },
  {
    type: "system",
    subtype: "task_started",
    task_id: "b1234abcd",
    description: "sleep 1",
    task_type: "local_bash",
    session_id: sid,
    uuid: "u-6"
  },
  {
    type: "system",
    subtype: "task_notification",
    task_id: "b1234abcd",
    status: "completed",
    output_file: "/tmp/o",
    summary: "done",
    session_id: sid,
    uuid: "u-7"
  },
  {
    type: "system",
    subtype: "compact_boundary",
    compact_metadata: { trigger: "manual", pre_tokens: 1000 },
    session_id: sid,
    uuid: "u-8"
  },
  {
    type: "rate_limit_event",
    rate_limit_info: { status: "allowed", resetsAt: 1 },
    session_id: sid,
    uuid: "u-9"
  },
  {
    type: "result",
    subtype: "success",
    is_error: false,
    duration_ms: 500,
    duration_api_ms: 400,
    num_turns: 1,
    result: "Hello",
    stop_reason: "end_turn",
    session_id: sid,
    total_cost_usd: 0.001,
    usage,
    modelUsage: {
      "claude-sonnet-4-5": {
        inputTokens: 12,
        outputTokens: 5,
        cacheReadInputTokens: 0,
        cacheCreationInputTokens: 0,
        webSearchRequests: 0,
        costUSD: 0.001,
        contextWindow: 200000,
        maxOutputTokens: 32000
      }
    },
    permission_denials: [],
    uuid: "u-10"
  },
  { type: "system", subtype: "session_state_changed", state: "idle", session_id: sid, uuid: "u-11" }
]
