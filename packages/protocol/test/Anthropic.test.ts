import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import * as Anthropic from "../src/Anthropic.js"

// Compile-time: the schemas are pure validators (Encoded == Type).
const pure = <A>(schema: Schema.Schema<A, A, never>) => schema
pure(Anthropic.ContentBlock)
pure(Anthropic.MessageStreamEvent)
pure(Anthropic.MessagesRequest)
pure(Anthropic.Message)

const sse = `event: message_start
data: {"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":1,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me think."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hello, "}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"world."}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01","name":"Bash","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\\"command\\": "}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\\"ls\\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}

event: message_stop
data: {"type":"message_stop"}

`

const parseSse = (text: string) =>
  text
    .split("\n\n")
    .filter((frame) => frame.length > 0)
    .map((frame) => {
      const [eventLine, dataLine] = frame.split("\n")
      return { event: eventLine!.slice("event: ".length), data: JSON.parse(dataLine!.slice("data: ".length)) as unknown }
    })

describe("Anthropic", () => {
  it("validates a realistic SSE event sequence", () => {
    const frames = parseSse(sse)
    expect(frames).toHaveLength(16)
    for (const frame of frames) {
      expect(Schema.is(Anthropic.MessageStreamEvent)(frame.data)).toBe(true)
    }
  })

  it.effect("decodes to an equal value when excess fields are preserved", () =>
    Effect.gen(function*() {
      for (const { data } of parseSse(sse)) {
        const decoded = yield* Schema.decodeUnknown(Anthropic.MessageStreamEvent)(data, {
          onExcessProperty: "preserve"
        })
        expect(decoded).toEqual(data)
      }
    }))

  it("keeps a block of an unknown type, with its fields", () => {
    const block = { type: "server_tool_use", id: "srvtoolu_01", name: "web_search", input: { query: "effect" } }
    expect(Schema.is(Anthropic.ContentBlock)(block)).toBe(true)
    const decoded = Schema.decodeUnknownSync(Anthropic.ContentBlock)(block, { onExcessProperty: "preserve" })
    expect(decoded).toEqual(block)
    const event = { type: "content_block_delta", index: 0, delta: { type: "future_delta", x: 1 } }
    expect(Schema.is(Anthropic.MessageStreamEvent)(event)).toBe(true)
  })

  it("rejects a malformed block of a known type", () => {
    expect(Schema.is(Anthropic.ContentBlock)({ type: "text" })).toBe(false)
    expect(Schema.is(Anthropic.ContentBlock)({ type: "tool_use", id: "toolu_01", name: "Bash" })).toBe(false)
    expect(Schema.is(Anthropic.ContentBlock)({ type: "thinking", thinking: "no signature" })).toBe(false)
    const delta = { type: "content_block_delta", index: 0, delta: { type: "text_delta" } }
    expect(Schema.is(Anthropic.MessageStreamEvent)(delta)).toBe(false)
    const result = Schema.decodeUnknownEither(Anthropic.ContentBlock)({ type: "image", source: { type: "base64" } })
    expect(Either.isLeft(result)).toBe(true)
  })

  it("tolerates excess fields and validates a request", () => {
    const request = {
      model: "claude-sonnet-4-5",
      max_tokens: 32000,
      stream: true,
      system: [{ type: "text", text: "You are Claude Code.", cache_control: { type: "ephemeral" } }],
      messages: [
        { role: "user", content: [{ type: "text", text: "hi" }] },
        { role: "assistant", content: [{ type: "tool_use", id: "toolu_01", name: "Bash", input: { command: "ls" } }] },
        {
          role: "user",
          content: [{ type: "tool_result", tool_use_id: "toolu_01", content: [{ type: "text", text: "a\nb" }] }]
        }
      ],
      tools: [{ name: "Bash", description: "Run a command", input_schema: { type: "object" } }],
      thinking: { type: "enabled", budget_tokens: 1024 },
      metadata: { user_id: "user_x" },
      context_management: { edits: [] }
    }
    expect(Schema.is(Anthropic.MessagesRequest)(request)).toBe(true)
    expect(Schema.is(Anthropic.MessagesRequest)({ ...request, max_tokens: "many" })).toBe(false)
  })

  it("accepts an API error body", () => {
    const body = { type: "error", error: { type: "overloaded_error", message: "Overloaded" }, request_id: "req_1" }
    expect(Schema.is(Anthropic.ErrorEvent)(body)).toBe(true)
  })
})

describe("Anthropic against captured CLI output", () => {
  const fixtures = new URL("./fixtures/", import.meta.url)
  const files = readdirSync(fixtures).filter((name) => name.endsWith(".ndjson"))
  const lines = files.flatMap((name) =>
    readFileSync(new URL(name, fixtures), "utf8").split("\n").filter((line) => line.length > 0).map((line) => ({
      name,
      value: JSON.parse(line) as unknown
    }))
  )
  const field = (value: unknown, key: string): unknown =>
    typeof value === "object" && value !== null && key in value ? Reflect.get(value, key) : undefined

  it("every stream_event carries a MessageStreamEvent", () => {
    const events = lines.filter(({ value }) => field(value, "type") === "stream_event")
    expect(events.length).toBeGreaterThan(20)
    for (const { name, value } of events) {
      expect({ name, ok: Schema.is(Anthropic.MessageStreamEvent)(field(value, "event")) }).toEqual({ name, ok: true })
    }
  })

  it("every assistant message is a Message", () => {
    const messages = lines.filter(({ value }) => field(value, "type") === "assistant")
    expect(messages.length).toBeGreaterThan(5)
    for (const { name, value } of messages) {
      expect({ name, ok: Schema.is(Anthropic.Message)(field(value, "message")) }).toEqual({ name, ok: true })
    }
  })
})
