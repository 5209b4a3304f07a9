import { describe, expect, it } from "@effect/vitest"
import { Anthropic, CliMessage, Control, HostMessage } from "@skein/protocol"
import { cliSamples } from "./samples.js"

describe("CliMessage.decoder", () => {
  it("decodes every sample as a known message and round-trips it to the same JSON", () => {
    cliSamples.forEach((sample, i) => {
      const text = JSON.stringify(sample)
      const decoded = CliMessage.decodeLine(text, i + 1)
      expect(decoded._tag, JSON.stringify(decoded)).toBe("Message")
      if (decoded._tag === "Message") expect(JSON.parse(JSON.stringify(decoded.message))).toEqual(sample)
    })
  })

  it("keeps excess fields, nested ones included", () => {
    const line = JSON.stringify({ ...cliSamples[2] as object, brand_new: { x: [1] } })
    const decoded = CliMessage.decodeLine(line)
    expect(decoded._tag).toBe("Message")
    if (decoded._tag === "Message") expect(JSON.stringify(decoded.message)).toBe(line)
  })

  it("keeps an unknown type and an unknown subtype as Unknown, with the raw JSON", () => {
    const unknownType = { type: "hologram", session_id: "s", payload: [1, 2] }
    expect(CliMessage.decodeLine(JSON.stringify(unknownType), 7)).toEqual({
      _tag: "Unknown",
      line: 7,
      type: "hologram",
      subtype: undefined,
      json: unknownType
    })
    const unknownSubtype = { type: "system", subtype: "weather_report", session_id: "s", uuid: "u" }
    expect(CliMessage.decodeLine(JSON.stringify(unknownSubtype))).toMatchObject({
      _tag: "Unknown",
      type: "system",
      subtype: "weather_report",
      json: unknownSubtype
    })
    const unknownRequest = { type: "control_request", request_id: "r", request: { subtype: "teleport" } }
    expect(CliMessage.decodeLine(JSON.stringify(unknownRequest))).toMatchObject({
      _tag: "Unknown",
      type: "control_request",
      subtype: "teleport"
    })
  })

  it("reports a known type with bad fields as Malformed, never as Unknown", () => {
    const bad = { type: "result", subtype: "success", session_id: "s", is_error: "no" }
    const decoded = CliMessage.decodeLine(JSON.stringify(bad), 3)
    expect(decoded._tag).toBe("Malformed")
    if (decoded._tag === "Malformed") {
      expect(decoded.line).toBe(3)
      expect(decoded.type).toBe("result")
      expect(decoded.subtype).toBe("success")
      expect(decoded.raw).toBe(JSON.stringify(bad))
      expect(decoded.issue).toContain("is_error")
    }
    const badBlock = { ...cliSamples[2] as object, message: { ...(cliSamples[2] as { message: object }).message, content: [{ type: "text" }] } }
    expect(CliMessage.decodeLine(JSON.stringify(badBlock))._tag).toBe("Malformed")
    const badSubtype = { type: "system", subtype: 42 }
    expect(CliMessage.decodeLine(JSON.stringify(badSubtype))._tag).toBe("Malformed")
  })

  it("keeps content blocks and stream events of new kinds", () => {
    const sample = cliSamples[2] as { message: { content: Array<unknown> } }
    const withNewBlock = { ...sample, message: { ...sample.message, content: [{ type: "server_tool_use", id: "s1", name: "web_search", input: {} }] } }
    expect(CliMessage.decodeLine(JSON.stringify(withNewBlock))._tag).toBe("Message")
    const newEvent = { type: "stream_event", event: { type: "content_block_pause" }, parent_tool_use_id: null, session_id: "s", uuid: "u" }
    expect(CliMessage.decodeLine(JSON.stringify(newEvent))._tag).toBe("Message")
  })

  it("reports a line that is not a JSON object as Unparseable", () => {
    expect(CliMessage.decodeLine("{not json", 2)).toMatchObject({ _tag: "Unparseable", line: 2, raw: "{not json" })
    expect(CliMessage.decodeLine("[1,2]", 3)).toMatchObject({ _tag: "Unparseable", error: "expected a JSON object" })
  })
})

describe("HostMessage", () => {
  it("encodes stdin messages one per line and decodes them back", () => {
    const messages: ReadonlyArray<HostMessage.HostMessage> = [
      HostMessage.user("hello 🧶"),
      Control.request("r1", { subtype: "initialize", hooks: { PreToolUse: [{ matcher: "Bash", hookCallbackIds: ["h1"] }] } }),
      Control.request("r2", { subtype: "interrupt" }),
      Control.request("r3", { subtype: "set_permission_mode", mode: "plan" }),
      Control.request("r4", { subtype: "set_model", model: "claude-haiku-4-5" }),
      Control.request("r5", { subtype: "set_max_thinking_tokens", max_thinking_tokens: 1024 }),
      Control.request("r6", { subtype: "mcp_status" }),
      Control.request("r7", { subtype: "mcp_set_servers", servers: {} }),
      Control.request("r8", { subtype: "mcp_message", server_name: "s", message: { jsonrpc: "2.0", id: 1, method: "ping" } }),
      Control.request("r9", { subtype: "stop_task", task_id: "b12345678" }),
      Control.request("r10", { subtype: "get_context_usage" }),
      Control.success("cli-1", { behavior: "allow", updatedInput: { command: "ls" } }),
      Control.error("cli-2", "no handler"),
      Control.cancel("r2")
    ]
    for (const message of messages) {
      const line = HostMessage.encode(message)
      expect(line.endsWith("\n")).toBe(true)
      expect(line.indexOf("\n")).toBe(line.length - 1)
      const decoded = HostMessage.decoder.decodeLine(line.trimEnd(), 1)
      expect(decoded).toEqual({ _tag: "Message", line: 1, message })
    }
  })
})

describe("guards for open unions", () => {
  it("narrow stream events, blocks and deltas to the known kinds", () => {
    const known = CliMessage.decodeLine(JSON.stringify(cliSamples[1]))
    const unknown = CliMessage.decodeLine(JSON.stringify({
      type: "stream_event",
      event: { type: "content_block_pause" },
      parent_tool_use_id: null,
      session_id: "s",
      uuid: "u"
    }))
    if (known._tag !== "Message" || known.message.type !== "stream_event") throw new Error("expected a stream event")
    if (unknown._tag !== "Message" || unknown.message.type !== "stream_event") throw new Error("expected a stream event")
    expect(CliMessage.isKnownStreamEvent(known.message.event)).toBe(true)
    expect(CliMessage.isKnownStreamEvent(unknown.message.event)).toBe(false)
    const event = known.message.event
    if (CliMessage.isKnownStreamEvent(event) && event.type === "content_block_delta") {
      expect(Anthropic.isKnownDelta(event.delta)).toBe(true)
      expect(Anthropic.isKnownDelta({ type: "telepathy_delta" })).toBe(false)
    }
    expect(Anthropic.isKnownBlock({ type: "text", text: "x" })).toBe(true)
    expect(Anthropic.isKnownBlock({ type: "server_tool_use" })).toBe(false)
  })
})
