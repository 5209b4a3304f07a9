import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Canonical } from "@skein/protocol"
import { History, Invariants } from "@skein/canonical"
import { Effect } from "effect"
import { captures, olderCaptures, translate } from "./captures.js"

/**
 * The live stream never echoes the host's prompt (no `--replay-user-messages`),
 * so the live side has no prompt message and its assistant messages no
 * `parentID`. A streamed message is dated when its stream opens, before the
 * CLI stamps its record (see `createdNoLaterThan`). Everything else must be
 * equal.
 */
const comparable = (messages: ReadonlyArray<History.WithParts>, keep: ReadonlySet<string>) =>
  messages
    .filter((m) => m.info.role === "assistant" || keep.has(m.info.id))
    .map((m) => ({
      info: m.info.role === "assistant" ? { ...m.info, parentID: "", time: { completed: m.info.time.completed } } : m.info,
      parts: m.parts
    }))

/** Each live assistant message is dated no later than its record in the transcript. */
const createdNoLaterThan = (live: ReadonlyArray<History.WithParts>, history: ReadonlyArray<History.WithParts>) => {
  const recorded = new Map(history.map((m) => [m.info.id, m.info.time.created]))
  return live.filter((m) => m.info.role === "assistant").every((m) => m.info.time.created <= recorded.get(m.info.id)!)
}

describe("History.fromTranscript", () => {
  // The 2.0 line prints no `timestamp` on stdout, so its live clock never ticks: live and history agree on 2.1 only.
  // After a compaction the history starts at the boundary: see the test of its own below.
  const withTranscripts = captures().filter((c) => c.transcript !== undefined && !c.name.startsWith("compact"))

  it("has captures with transcripts to compare", () => {
    expect(withTranscripts.map((c) => c.name)).toEqual(expect.arrayContaining(["retry", "two-tools"]))
  })

  for (const capture of withTranscripts) {
    it.effect(`equals the live translation of ${capture.name}: same ids, same final parts`, () =>
      Effect.gen(function*() {
        const live = History.collect(translate(capture))
        const history = yield* History.fromTranscript(capture.transcript!)
        const liveUsers = new Set(live.filter((m) => m.info.role === "user").map((m) => m.info.id))
        expect(comparable(history.messages, liveUsers)).toEqual(comparable(live, liveUsers))
        expect(createdNoLaterThan(live, history.messages)).toBe(true)
        // The history has the prompt the live stream lacked, and answers point at it.
        const prompts = history.messages.filter((m) => m.info.role === "user" && !liveUsers.has(m.info.id))
        expect(prompts.length).toBeGreaterThan(0)
        const first = history.messages.find((m) => m.info.role === "assistant")!.info
        expect(first.role === "assistant" && first.parentID).toBe(prompts[0]!.info.id)
      }).pipe(Effect.provide(NodeContext.layer)))
  }

  it.effect("after /compact, gives the boundary's message and what the CLI printed after it the ids they had live", () =>
    Effect.gen(function*() {
      const capture = captures().find((c) => c.name === "compact-history")!
      const live = History.collect(translate(capture))
      const history = yield* History.fromTranscript(capture.transcript!)
      const boundary = live.findIndex((m) => m.parts.some((p) => p.type === "compaction"))
      expect(boundary).toBeGreaterThan(0)
      const after = live.slice(boundary)
      expect(after.map((m) => m.parts.map((p) => p.type))).toEqual([["compaction"], ["text"], ["text"]])
      const byId = new Map(history.messages.map((m) => [m.info.id, m]))
      for (const message of after) expect(byId.get(message.info.id)).toEqual(message)
      // The history also has the /compact prompt and re-mints the messages the boundary preserved.
      expect(history.messages.length).toBe(after.length + 2)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("puts back the result of a parallel tool call that the effective view leaves on a side branch", () =>
    Effect.gen(function*() {
      const capture = captures().find((c) => c.name === "two-tools")!
      const history = yield* History.fromTranscript(capture.transcript!)
      const tools = history.messages.flatMap((m) => m.parts).filter((p): p is Canonical.ToolPart => p.type === "tool")
      expect(tools.map((p) => [p.callID, p.state.status])).toEqual([
        ["toolu_fake_0001_1", "completed"],
        ["toolu_fake_0001_2", "error"]
      ])
    }).pipe(Effect.provide(NodeContext.layer)))

  it("collects what a client holds: deltas applied, last state wins, sorted by id", () => {
    const capture = captures().find((c) => c.name === "text-thinking")!
    const [message] = History.collect(translate(capture))
    expect(message!.parts.map((p) => p.type)).toEqual(["step-start", "reasoning", "text", "step-finish"])
    const text = message!.parts.find((p) => p.type === "text")
    expect(text?.type === "text" && text.text).toBe("Hello! I'm happy to help. What would you like to work on today?")
  })

  it.effect("gives a history that keeps the invariants (turn rules aside: a transcript has no turns)", () =>
    Effect.gen(function*() {
      for (const capture of withTranscripts) {
        const history = yield* History.fromTranscript(capture.transcript!)
        const events = history.messages.flatMap((m) => [
          { type: "message.updated" as const, properties: { sessionID: m.info.sessionID, info: m.info } },
          ...m.parts.map((part) => ({ type: "message.part.updated" as const, properties: { sessionID: part.sessionID, part } }))
        ])
        expect(Invariants.check(events, { turns: false })).toBeUndefined()
      }
      for (const capture of olderCaptures().filter((c) => c.transcript !== undefined)) {
        const history = yield* History.fromTranscript(capture.transcript!)
        expect(history.messages.some((m) => m.info.role === "assistant")).toBe(true)
      }
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("History.withShown", () => {
  const user = (id: string, text: string): History.WithParts => ({
    info: { id, sessionID: "ses_1", role: "user", time: { created: 1 } },
    parts: [{ id: `prt_${id}`, sessionID: "ses_1", messageID: id, type: "text", text }]
  })
  const assistant = (id: string, text: string, completed?: number): History.WithParts => ({
    info: {
      id,
      sessionID: "ses_1",
      role: "assistant",
      time: completed === undefined ? { created: 2 } : { created: 2, completed },
      parentID: "",
      modelID: "m",
      providerID: "anthropic",
      mode: "build",
      agent: "build",
      path: { cwd: "/", root: "/" },
      cost: 0,
      tokens: { input: 0, output: 0, reasoning: 0, cache: { read: 0, write: 0 } }
    },
    parts: [{ id: `prt_${id}`, sessionID: "ses_1", messageID: id, type: "text", text }]
  })

  it("adds what the transcript lacks, in id order, and keeps the transcript's copy of a finished message", () => {
    const history = [user("msg_1", "one"), assistant("msg_2", "recorded", 3)]
    const shown = [assistant("msg_2", "shown", 3), user("msg_3", "two")]
    expect(History.withShown(history, shown).map((m) => [m.info.id, m.parts[0]!.type === "text" && m.parts[0]!.text])).toEqual([
      ["msg_1", "one"],
      ["msg_2", "recorded"],
      ["msg_3", "two"]
    ])
  })

  it("takes the live copy of a reply still streaming: the transcript holds only its finished blocks", () => {
    const merged = History.withShown([user("msg_1", "one"), assistant("msg_2", "Hel")], [assistant("msg_2", "Hello, wor")])
    expect(merged.map((m) => m.parts[0]!.type === "text" && m.parts[0]!.text)).toEqual(["one", "Hello, wor"])
  })

  it("is the history when nothing was shown", () => {
    const history = [user("msg_1", "one")]
    expect(History.withShown(history, [])).toBe(history)
  })
})

describe("History.folding", () => {
  const part = (text: string): Canonical.CanonicalEvent =>
    Canonical.event("message.part.updated", {
      sessionID: "ses_1",
      part: { id: "prt_1", sessionID: "ses_1", messageID: "msg_1", type: "text", text }
    })
  const delta = (text: string): Canonical.CanonicalEvent =>
    Canonical.event("message.part.delta", { sessionID: "ses_1", messageID: "msg_1", partID: "prt_1", field: "text", delta: text })
  const textOf = (fold: History.Folding) => fold.messages().flatMap((m) => m.parts.map((p) => (p.type === "text" ? p.text : "")))

  it("applies a part's deltas in order when read, again after more arrive, and an update replaces them", () => {
    const fold = History.folding()
    fold.add(Canonical.event("message.updated", { sessionID: "ses_1", info: { id: "msg_1", sessionID: "ses_1", role: "user", time: { created: 1 } } }))
    for (const event of [part(""), delta("Hel"), delta("lo, "), delta("wor")]) fold.add(event)
    expect(textOf(fold)).toEqual(["Hello, wor"])
    fold.add(delta("ld"))
    expect(textOf(fold)).toEqual(["Hello, world"])
    fold.add(part("Hello, world."))
    fold.add(delta("!"))
    expect(textOf(fold)).toEqual(["Hello, world.!"])
  })
})
