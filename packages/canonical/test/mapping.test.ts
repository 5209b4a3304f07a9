/**
 * The mapping tables for what the captures do not show: requests and their
 * answers, system subtypes of other releases, attachments, progress and
 * tombstones.
 */
import { describe, expect, it } from "@effect/vitest"
import type { Canonical } from "@skein/protocol"
import { CliMessage } from "@skein/protocol"
import { EventTranslator, Invariants } from "@skein/canonical"

const session_id = "11111111-2222-4333-8444-555555555555"

let line = 0
/** A stdout line as the translator gets it: decoded leniently. */
const cli = (json: Record<string, unknown>): EventTranslator.Input => ({ _tag: "Cli", event: CliMessage.decoder.decodeJson(json, line++) })

const run = (inputs: ReadonlyArray<EventTranslator.Input>) => {
  let state = EventTranslator.initial({ cliSessionId: session_id })
  const out: Array<Canonical.CanonicalEvent> = []
  for (const input of inputs) {
    const [next, events] = EventTranslator.step(state, input)
    state = next
    out.push(...events)
  }
  return out
}

const types = (events: ReadonlyArray<Canonical.CanonicalEvent>) => events.map((e) => e.type)

const canUseTool = (request_id: string, tool_name: string, input: Record<string, unknown>) => ({
  type: "control_request",
  request_id,
  request: { subtype: "can_use_tool" as const, tool_name, input, tool_use_id: `toolu_${request_id}` }
})

describe("permissions and questions", () => {
  it("asks once per request, whichever side reports it, and replies with the host's answer", () => {
    const ask = canUseTool("r1", "Bash", { command: "rm -rf build" })
    const events = run([
      cli(ask),
      { _tag: "PermissionAsked", requestId: "r1", request: ask.request },
      { _tag: "PermissionAnswered", requestId: "r1", reply: "always" },
      { _tag: "PermissionAnswered", requestId: "r1", reply: "once" }
    ])
    expect(types(events)).toEqual(["permission.asked", "permission.replied"])
    const [asked, replied] = events
    expect(asked?.type === "permission.asked" && asked.properties).toMatchObject({
      permission: "bash",
      patterns: ["rm -rf build"],
      metadata: { command: "rm -rf build", cli: { tool: "Bash", input: { command: "rm -rf build" } } }
    })
    expect(asked?.type === "permission.asked" && asked.properties.id).toMatch(/^per_/)
    expect(replied?.type === "permission.replied" && replied.properties).toMatchObject({ reply: "always" })
    expect(replied?.type === "permission.replied" && asked?.type === "permission.asked" &&
      replied.properties.requestID === asked.properties.id).toBe(true)
  })

  it("turns AskUserQuestion into question.asked in opencode's shape, and the answer into question.replied", () => {
    const events = run([
      cli(canUseTool("q1", "AskUserQuestion", {
        questions: [{ question: "Which?", header: "Pick", multiSelect: false, options: [{ label: "A", description: "first" }] }]
      })),
      { _tag: "QuestionAnswered", requestId: "q1", answers: [["A"]] }
    ])
    expect(types(events)).toEqual(["question.asked", "question.replied"])
    const asked = events[0]
    expect(asked?.type === "question.asked" && asked.properties.questions).toEqual([
      { question: "Which?", header: "Pick", options: [{ label: "A", description: "first" }], multiple: false }
    ])
    expect(asked?.type === "question.asked" && asked.properties.id).toMatch(/^que_/)
  })

  it("maps an MCP elicitation to a question, and the CLI's cancel to question.rejected", () => {
    const events = run([
      cli({ type: "control_request", request_id: "e1", request: { subtype: "elicitation", mcp_server_name: "db", message: "Password?" } }),
      cli({ type: "control_cancel_request", request_id: "e1" }),
    ])
    expect(types(events)).toEqual(["question.asked", "question.rejected"])
  })

  it("rejects a withdrawn permission", () => {
    const events = run([cli(canUseTool("r2", "Edit", { file_path: "/a" })), cli({ type: "control_cancel_request", request_id: "r2" })])
    expect(types(events)).toEqual(["permission.asked", "permission.replied"])
    expect(events[1]?.type === "permission.replied" && events[1].properties.reply).toBe("reject")
  })
})

describe("system subtypes and other messages", () => {
  const stamped = { uuid: "u-1", session_id }

  it("maps subtypes of other releases by their fields", () => {
    const events = run([
      cli({ type: "system", subtype: "microcompact_boundary", ...stamped }),
      cli({ type: "system", subtype: "stop_hook_summary", hookLabel: "Stop", hookCount: 2, hookErrors: [], preventedContinuation: false, totalDurationMs: 40, ...stamped }),
      cli({ type: "system", subtype: "turn_duration", durationMs: 1200, ...stamped }),
      cli({ type: "system", subtype: "cache_warning", content: "cache miss", ...stamped }),
      cli({ type: "system", subtype: "api_error", level: "error", error: { status: 400, formatted: "400 bad request" }, ...stamped }),
      cli({ type: "system", subtype: "hook_started", hook_id: "h", hook_name: "Stop", hook_event: "Stop", ...stamped }),
      cli({ type: "system", subtype: "informational", content: "note", level: "info", ...stamped }),
      cli({ type: "system", subtype: "brand_new", ...stamped }),
    ])
    expect(types(events)).toEqual([
      "message.updated",
      "message.part.updated",
      "session.compacted",
      "session.hook_summary",
      "session.metrics",
      "session.warning",
      "session.error",
      "session.hook_progress",
      "session.info",
      "session.cli_event"
    ])
    const compaction = events[1]
    expect(compaction?.type === "message.part.updated" && compaction.properties.part).toMatchObject({ type: "compaction", auto: true })
  })

  it("maps attachments, progress and tombstones, and keeps what it cannot map", () => {
    const events = run([
      cli({ type: "attachment", attachment: { type: "hook_success", content: "ok" }, ...stamped }),
      cli({ type: "progress", toolUseID: "toolu_1", parentToolUseID: "toolu_0", data: { type: "bash_progress" }, ...stamped }),
      cli({ type: "tombstone", message: { uuid: "gone" }, ...stamped }),
      cli({ type: "tool_progress", tool_use_id: "toolu_1", tool_name: "Bash", parent_tool_use_id: null, elapsed_time_seconds: 3, ...stamped }),
      cli({ type: "keep_alive" }),
      cli({ type: "result", subtype: "success" }),
    ])
    expect(types(events)).toEqual([
      "message.attachment",
      "tool.progress",
      "message.removed",
      "tool.progress",
      "session.cli_event",
      "session.cli_event"
    ])
    const malformed = events[5]
    expect(malformed?.type === "session.cli_event" && malformed.properties.kind).toBe("Malformed")
    expect(Invariants.check(events)).toBeUndefined()
  })

  it("turns bad streamed tool input into {} plus a diagnostic, never a throw", () => {
    const stream = (event: Record<string, unknown>) => ({ type: "stream_event", event, parent_tool_use_id: null, ...stamped })
    const usage = { input_tokens: 1, output_tokens: 1 }
    const events = run([
      { _tag: "TurnStarted", turn: 1, origin: "host" },
      cli(stream({ type: "message_start", message: { id: "m1", type: "message", role: "assistant", model: "x", content: [], stop_reason: null, stop_sequence: null, usage } })),
      cli(stream({ type: "content_block_start", index: 0, content_block: { type: "tool_use", id: "t1", name: "Bash", input: {} } })),
      cli(stream({ type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: "{\"comm" } })),
      cli(stream({ type: "content_block_stop", index: 0 })),
      { _tag: "TurnEnded", turn: 1, interrupted: true }
    ])
    const kinds = events.flatMap((e) => e.type === "session.cli_event" ? [e.properties.kind] : [])
    expect(kinds).toContain("BadToolInput")
    const tool = events.flatMap((e) => e.type === "message.part.updated" && e.properties.part.type === "tool" ? [e.properties.part] : []).at(-1)
    expect(tool?.state).toMatchObject({ status: "error", error: "interrupted", input: {} })
    expect(Invariants.check(events)).toBeUndefined()
  })
})
