import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import { Canonical } from "@skein/protocol"

const sessionID = "ses_01"
const messageID = "msg_02"
const tokens = { input: 12, output: 34, reasoning: 0, cache: { read: 5, write: 6 } }

const tool = (state: Canonical.ToolState): Canonical.ToolPart => ({
  id: "prt_tool",
  sessionID,
  messageID,
  type: "tool",
  callID: "toolu_01",
  tool: "Bash",
  state
})

const parts: ReadonlyArray<Canonical.Part> = [
  { id: "prt_1", sessionID, messageID, type: "text", text: "hello", time: { start: 1, end: 2 } },
  { id: "prt_2", sessionID, messageID, type: "reasoning", text: "", redacted: true, time: { start: 1 } },
  tool({ status: "pending", input: {}, raw: "{\"comm" }),
  tool({ status: "running", input: { command: "ls" }, title: "ls", time: { start: 10 } }),
  tool({
    status: "completed",
    input: { command: "ls" },
    output: "a\nb",
    title: "ls",
    metadata: { exit: 0 },
    time: { start: 10, end: 20 }
  }),
  tool({ status: "error", input: { command: "false" }, error: "exit 1", time: { start: 10, end: 20 } }),
  { id: "prt_3", sessionID, messageID, type: "step-start" },
  { id: "prt_4", sessionID, messageID, type: "step-finish", reason: "end_turn", cost: 0.0123, tokens },
  { id: "prt_5", sessionID, messageID, type: "compaction", auto: true },
  {
    id: "prt_6",
    sessionID,
    messageID,
    type: "retry",
    attempt: 2,
    error: { name: "APIError", data: { message: "overloaded", isRetryable: true, statusCode: 529 } },
    time: { created: 99 }
  },
  { id: "prt_7", sessionID, messageID, type: "subtask", prompt: "dig", description: "search", agent: "Explore" },
  { id: "prt_8", sessionID, messageID, type: "file", mime: "image/png", url: "data:image/png;base64,iVBORw0KGgo=", filename: "dot.png" }
]

const usage = { total_tokens: 100, tool_uses: 3, duration_ms: 4500 }

/** At least one sample of every event type. */
const events: ReadonlyArray<Canonical.CanonicalEvent> = [
  Canonical.event("session.created", {
    info: { id: sessionID, title: "t", directory: "/w", time: { created: 1, updated: 1 } }
  }),
  Canonical.event("session.updated", {
    info: { id: sessionID, title: "t2", directory: "/w", parentID: "ses_00", time: { created: 1, updated: 2 } }
  }),
  Canonical.event("session.deleted", {
    info: { id: sessionID, title: "t2", directory: "/w", projectID: "prj_1", version: "skein", time: { created: 1, updated: 3 } }
  }),
  Canonical.event("session.status", { sessionID, status: { type: "busy" } }),
  Canonical.event("session.status", { sessionID, status: { type: "idle" } }),
  Canonical.event("session.status", {
    sessionID,
    status: { type: "retry", attempt: 1, message: "rate limited", next: 1_700_000_000_000 }
  }),
  Canonical.event("session.idle", { sessionID }),
  Canonical.event("session.error", {
    sessionID,
    error: { name: "UnknownError", data: { message: "boom" } }
  }),
  Canonical.event("message.updated", {
    sessionID,
    info: { id: "msg_01", sessionID, role: "user", time: { created: 1 } }
  }),
  Canonical.event("message.updated", {
    sessionID,
    info: {
      id: messageID,
      sessionID,
      role: "assistant",
      time: { created: 2, completed: 3 },
      parentID: "msg_01",
      modelID: "claude-sonnet-4-5",
      providerID: "anthropic",
      cost: 0.5,
      tokens,
      error: { name: "MessageAbortedError", data: { message: "interrupted" } }
    }
  }),
  Canonical.event("message.removed", { sessionID, messageID }),
  ...parts.map((part) => Canonical.event("message.part.updated", { sessionID, part, time: 5 })),
  Canonical.event("message.part.delta", { sessionID, messageID, partID: "prt_1", field: "text", delta: "lo" }),
  Canonical.event("permission.asked", {
    id: "req_1",
    sessionID,
    permission: "Bash",
    patterns: ["rm -rf build"],
    metadata: { command: "rm -rf build" },
    always: ["rm:*"],
    tool: { messageID, callID: "toolu_01" }
  }),
  Canonical.event("permission.replied", { sessionID, requestID: "req_1", reply: "once" }),
  Canonical.event("question.asked", {
    id: "q_1",
    sessionID,
    questions: [{
      question: "Which?",
      header: "Pick",
      options: [{ label: "A", description: "first" }, { label: "B", description: "second" }],
      multiple: false
    }]
  }),
  Canonical.event("question.replied", { sessionID, requestID: "q_1", answers: [["A"]] }),
  Canonical.event("task.started", {
    sessionID,
    taskID: "a1b2c3d4e",
    toolUseID: "toolu_02",
    description: "background agent",
    taskType: "local_agent",
    prompt: "go"
  }),
  Canonical.event("task.progress", {
    sessionID,
    taskID: "a1b2c3d4e",
    description: "background agent",
    usage,
    lastToolName: "Grep"
  }),
  Canonical.event("task.completed", {
    sessionID,
    taskID: "a1b2c3d4e",
    status: "completed",
    summary: "done",
    outputFile: "/tmp/out",
    usage
  }),
  Canonical.event("tool.progress", {
    sessionID,
    toolUseID: "toolu_01",
    toolName: "Bash",
    parentToolUseID: null,
    elapsedTimeSeconds: 3
  }),
  Canonical.event("message.attachment", {
    sessionID,
    attachmentType: "hook_success",
    attachment: { type: "hook_success", content: "ok" }
  }),
  Canonical.event("session.hook_summary", {
    sessionID,
    hookLabel: "Stop",
    hookCount: 2,
    hookErrors: [],
    preventedContinuation: false,
    totalDurationMs: 40
  }),
  Canonical.event("session.metrics", { sessionID, durationMs: 1200, numTurns: 2, cost: 0.1, tokens }),
  Canonical.event("session.compacted", { sessionID }),
  Canonical.event("question.rejected", { sessionID, requestID: "q_1" }),
  Canonical.event("session.info", { sessionID, message: "note", level: "info", source: "informational" }),
  Canonical.event("session.warning", { sessionID, message: "cache miss", source: "cache_warning" }),
  Canonical.event("session.hook_progress", {
    sessionID,
    hookID: "h1",
    hookName: "Stop",
    hookEvent: "Stop",
    phase: "response",
    exitCode: 0,
    outcome: "success"
  }),
  Canonical.event("session.cli_event", { sessionID, kind: "unknown", cliType: "brand_new", data: { type: "brand_new" } }),
  Canonical.event("session.message", { sessionID, message: { type: "assistant" } }),
  Canonical.event("session.stream_event", { sessionID, message: { type: "stream_event" } }),
  Canonical.event("session.control_request", { sessionID, message: { type: "control_request" } }),
  Canonical.event("session.result", { sessionID, message: { type: "result" } })
]

const roundTrip = (input: unknown) =>
  Effect.gen(function*() {
    const json = JSON.parse(JSON.stringify(input))
    const decoded = yield* Canonical.decodeEvent(json)
    const encoded = yield* Canonical.encodeEvent(decoded)
    return { json, encoded }
  })

describe("Canonical", () => {
  it("samples cover every event type", () => {
    expect(new Set(events.map((e) => e.type))).toEqual(new Set(Canonical.eventTypes))
    expect(Canonical.eventTypes).toHaveLength(31)
  })

  it.effect("every event round-trips through decode/encode to the same JSON", () =>
    Effect.forEach(events, (event) =>
      Effect.gen(function*() {
        const { json, encoded } = yield* roundTrip(event)
        expect(JSON.stringify(encoded)).toEqual(JSON.stringify(json))
      })))

  it.effect("every part type round-trips inside message.part.updated", () =>
    Effect.gen(function*() {
      const types = new Set<string>()
      for (const part of parts) {
        const decoded = yield* Canonical.decodePart(JSON.parse(JSON.stringify(part)))
        types.add(decoded.type)
        expect(decoded).toEqual(part)
      }
      expect(types).toEqual(
        new Set(["text", "file", "reasoning", "tool", "step-start", "step-finish", "compaction", "retry", "subtask"])
      )
    }))

  it("a tool state with the wrong fields for its status fails", () => {
    // completed without output/title/end: a running state relabelled as completed
    const skipped = tool({ status: "running", input: {}, time: { start: 1 } })
    const bad = [
      { ...skipped, state: { ...skipped.state, status: "completed" } },
      { ...skipped, state: { status: "error", input: {}, time: { start: 1, end: 2 } } },
      { ...skipped, state: { status: "running", input: {} } },
      { ...skipped, state: { status: "finished", input: {} } }
    ]
    for (const part of bad) {
      expect(Either.isLeft(Schema.decodeUnknownEither(Canonical.Part)(part))).toBe(true)
      const event = { type: "message.part.updated", properties: { sessionID, part } }
      expect(Either.isLeft(Canonical.decodeEventEither(event))).toBe(true)
    }
  })

  it("unknown event types fail the union but pass the bare envelope", () => {
    const unknown = { type: "session.diff", properties: { sessionID, diff: [] } }
    expect(Either.isLeft(Canonical.decodeEventEither(unknown))).toBe(true)
    expect(Either.isLeft(Canonical.decodeEventEither({ type: "session.idle" }))).toBe(true)
    expect(Schema.decodeUnknownEither(Canonical.Envelope)(unknown)).toEqual(Either.right(unknown))
  })

  it("excess fields are tolerated", () => {
    const event = {
      type: "session.idle",
      properties: { sessionID, addedLater: 1 },
      id: 42
    }
    expect(Canonical.decodeEventEither(event)).toEqual(
      Either.right(Canonical.event("session.idle", { sessionID }))
    )
  })
})
