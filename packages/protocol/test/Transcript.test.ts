import { describe, expect, it } from "@effect/vitest"
import { Lenient, Transcript } from "@skein/protocol"

const encoder = new TextEncoder()
const sessionId = "c549f69e-7623-4b47-a8bb-d4da2b745b92"
const chain = { isSidechain: false, sessionId, timestamp: "2026-11-30T06:00:33.910Z", cwd: "/w", version: "2.1.332" }

const entries: ReadonlyArray<unknown> = [
  { type: "queue-operation", operation: "enqueue", timestamp: chain.timestamp, sessionId, content: "say hi" },
  { ...chain, type: "user", parentUuid: null, uuid: "u1", message: { role: "user", content: "say hi" }, promptId: "p1" },
  { ...chain, type: "attachment", parentUuid: "u1", uuid: "a1", attachment: { type: "date", date: "2026-11-30" } },
  { type: "atis-latch", atis: "", sessionId },
  {
    ...chain,
    type: "assistant",
    parentUuid: "a1",
    uuid: "m1",
    requestId: "req_1",
    message: {
      id: "msg_1",
      type: "message",
      role: "assistant",
      model: "claude-sonnet-4-5",
      content: [{ type: "text", text: "Hello" }],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: { input_tokens: 10, output_tokens: 2 }
    }
  },
  {
    ...chain,
    type: "system",
    subtype: "compact_boundary",
    parentUuid: null,
    logicalParentUuid: "m1",
    uuid: "b1",
    content: "Conversation compacted",
    compactMetadata: { trigger: "manual", preTokens: 21000 }
  },
  { ...chain, type: "user", parentUuid: "b1", uuid: "s1", isCompactSummary: true, message: { role: "user", content: "Summary: ..." } },
  { type: "last-prompt", lastPrompt: "say hi", leafUuid: "s1", sessionId },
  { type: "custom-title", customTitle: "Greeting", sessionId },
  { type: "cost-state", sessionId, totalCostUSD: 0.06, modelUsage: { "claude-sonnet-4-5": { inputTokens: 10 } } }
]

describe("Transcript.decoder", () => {
  it("decodes conversation and metadata entries, and keeps bookkeeping entries as Unknown", () => {
    const bytes = encoder.encode(entries.map((e) => JSON.stringify(e)).join("\n") + "\n")
    const decoded = Lenient.decodeAll(Transcript.decoder, bytes)
    expect(decoded.map((d) => d._tag)).toEqual([
      "Message", "Message", "Message", "Unknown", "Message", "Message", "Message", "Message", "Message", "Message"
    ])
    const messages = decoded.flatMap((d) => d._tag === "Message" ? [d.message] : [])
    expect(messages.filter(Transcript.isChainEntry).map((e) => e.uuid)).toEqual(["u1", "a1", "m1", "b1", "s1"])
    const boundary = messages.find(Transcript.isCompactBoundary)
    expect(boundary?.logicalParentUuid).toBe("m1")
    expect(boundary?.compactMetadata?.preTokens).toBe(21000)
    decoded.forEach((d, i) => {
      if (d._tag === "Message") expect(JSON.stringify(d.message)).toBe(JSON.stringify(entries[i]))
    })
  })

  it("reports a torn last line and a chain entry without its links as diagnostics", () => {
    const torn = JSON.stringify(entries[1]).slice(0, 40)
    const unlinked = JSON.stringify({ type: "user", message: { role: "user", content: "x" } })
    const decoded = Lenient.decodeAll(Transcript.decoder, encoder.encode(`${unlinked}\n${torn}`))
    expect(decoded.map((d) => d._tag)).toEqual(["Malformed", "Unparseable"])
  })
})
