import { describe, expect, it } from "@effect/vitest"
import { Canonical } from "@skein/protocol"
import { Invariants } from "@skein/canonical"

const sessionID = "ses_1"
const messageID = "msg_1"
const busy = Canonical.event("session.status", { sessionID, status: { type: "busy" } })
const idle = [Canonical.event("session.status", { sessionID, status: { type: "idle" } }), Canonical.event("session.idle", { sessionID })]
const part = (p: Canonical.Part) => Canonical.event("message.part.updated", { sessionID, part: p })
const text = part({ id: "prt_1", sessionID, messageID, type: "text", text: "" })
const delta = Canonical.event("message.part.delta", { sessionID, messageID, partID: "prt_1", field: "text", delta: "hi" })
const tool = (status: "pending" | "completed") =>
  part({
    id: "prt_2",
    sessionID,
    messageID,
    type: "tool",
    callID: "t",
    tool: "Bash",
    state: status === "pending"
      ? { status, input: {} }
      : { status, input: {}, output: "", title: "", metadata: {}, time: { start: 1, end: 2 } }
  })
const stepStart = part({ id: "prt_0", sessionID, messageID, type: "step-start" })

const ruleOf = (events: ReadonlyArray<Canonical.CanonicalEvent>) => Invariants.check(events)?.rule

describe("Invariants.check", () => {
  it("accepts a well-formed turn", () => {
    expect(ruleOf([busy, text, delta, tool("pending"), tool("completed"), ...idle])).toBeUndefined()
  })

  it("finds each broken promise", () => {
    expect(ruleOf([busy, delta, text, ...idle])).toBe("part-before-delta")
    expect(ruleOf([busy, tool("pending"), ...idle])).toBe("tool-ends")
    expect(ruleOf([busy, stepStart, ...idle])).toBe("step-balanced")
    expect(ruleOf([busy, busy, ...idle])).toBe("one-idle-per-turn")
    expect(ruleOf([busy, text])).toBe("one-idle-per-turn")
    expect(ruleOf([busy, text, ...idle, delta])).toBe("idle-after-last-part")
    expect(ruleOf([busy, ...idle, Canonical.event("session.idle", { sessionID })])).toBe("one-idle-per-turn")
  })

  it("finds an event that does not survive encode, JSON and decode", () => {
    const extra = Canonical.event("session.idle", { sessionID })
    const bad = { ...extra, properties: { ...extra.properties, surplus: 1 } }
    expect(Invariants.roundTrips(bad)).toBe("decodes to a different value")
    expect(ruleOf([busy, bad, ...idle])).toBe("round-trip")
  })
})
