import type * as Acp from "@agentclientprotocol/sdk/unstable"
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { EventTranslator, History } from "@skein/canonical"
import { CliMessage, Lenient } from "@skein/protocol"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Updates } from "@skein/acp"

/** The real-CLI captures of `@skein/protocol`: 2.1.332 at the top, 2.0.76 in its own folder. */
const fixtures = Path.join(import.meta.dirname, "../../protocol/test/fixtures")

const capture = (name: string) => {
  const events = Lenient.decodeAll(CliMessage.decoder, Fs.readFileSync(Path.join(fixtures, `${name}.ndjson`)))
  return { events, cliSessionId: EventTranslator.cliSessionIdOf(events) ?? "" }
}

const live = (name: string): ReadonlyArray<Acp.SessionUpdate> => {
  const { cliSessionId, events } = capture(name)
  const mapper = Updates.make({ users: false })
  return EventTranslator.translateAll({ cliSessionId }, events).flatMap((event) => mapper.map(event))
}

const textOf = (updates: ReadonlyArray<Acp.SessionUpdate>, kind: Acp.SessionUpdate["sessionUpdate"]) =>
  updates.flatMap((u) => (u.sessionUpdate === kind && "content" in u && !Array.isArray(u.content) && u.content?.type === "text" ? [u.content.text] : [])).join("")

const toolCalls = (updates: ReadonlyArray<Acp.SessionUpdate>) => {
  const calls = new Map<string, { readonly title: string; status: string | null | undefined; readonly kind: string | undefined; content: unknown }>()
  for (const u of updates) {
    if (u.sessionUpdate === "tool_call") {
      expect(calls.has(u.toolCallId)).toBe(false)
      calls.set(u.toolCallId, { title: u.title, status: u.status, kind: u.kind, content: u.content })
    }
    if (u.sessionUpdate === "tool_call_update") {
      const call = calls.get(u.toolCallId)
      expect(call).toBeDefined()
      if (call !== undefined) {
        call.status = u.status
        if (u.content !== undefined) call.content = u.content
      }
    }
  }
  return calls
}

describe("Updates", () => {
  it("maps a live stream: streamed text as chunks, each tool call once and then its updates to completion, usage per turn", () => {
    const updates = live("two-tools")
    const calls = toolCalls(updates)
    expect(calls.size).toBeGreaterThan(0)
    // One command succeeds (its output in a console block), the other exits 3.
    const ends = [...calls.values()].map((call) => [call.kind, call.status])
    expect(ends).toEqual(expect.arrayContaining([["execute", "completed"], ["execute", "failed"]]))
    for (const call of calls.values()) {
      expect(call.status === "completed" ? JSON.stringify(call.content) : "```console").toContain("```console")
      expect(call.status === "failed" ? JSON.stringify(call.content) : "Exit code 3").toContain("Exit code 3")
    }
    expect(textOf(updates, "agent_message_chunk").length).toBeGreaterThan(0)
    expect(updates.some((u) => u.sessionUpdate === "usage_update" && u.used > 0 && u.cost?.currency === "USD")).toBe(true)
    // A live session never echoes the client's own prompt.
    expect(updates.some((u) => u.sessionUpdate === "user_message_chunk")).toBe(false)
  })

  it("maps reasoning to thought chunks", () => {
    const updates = live("text-thinking")
    expect(textOf(updates, "agent_thought_chunk").length).toBeGreaterThan(0)
    expect(textOf(updates, "agent_message_chunk").length).toBeGreaterThan(0)
  })

  for (const name of ["two-tools", "cli-2.0.76/two-tools"]) {
    it.effect(`replays the transcript of ${name} as the live session showed it, the user's messages included`, () =>
      Effect.gen(function*() {
        const history = yield* History.fromTranscript(Path.join(fixtures, `${name}.transcript.jsonl`))
        const replayed = Updates.replay(history.messages)
        expect(textOf(replayed, "user_message_chunk").length).toBeGreaterThan(0)
        const shown = live(name)
        expect(textOf(replayed, "agent_message_chunk")).toBe(textOf(shown, "agent_message_chunk"))
        const replayedCalls = toolCalls(replayed)
        expect([...replayedCalls.keys()]).toEqual([...toolCalls(shown).keys()])
        expect([...replayedCalls.values()].map((call) => call.status)).toEqual([...toolCalls(shown).values()].map((call) => call.status))
        // A replayed call arrives whole: one `tool_call`, already ended, with its output.
        expect(replayed.filter((u) => u.sessionUpdate === "tool_call_update")).toEqual([])
      }).pipe(Effect.provide(NodeContext.layer)))
  }

  it("shows a TodoWrite as the plan, once, and an edit as a diff", () => {
    const mapper = Updates.make({ users: false })
    const base = { sessionID: "ses_1", messageID: "msg_1", type: "tool" as const }
    const todos = [{ content: "Write the test", status: "in_progress", activeForm: "Writing" }, { content: "Ship", status: "pending" }]
    const todoPart = {
      ...base,
      id: "prt_1",
      callID: "toolu_1",
      tool: "todowrite",
      metadata: { cli: { tool: "TodoWrite", input: { todos } } },
      state: { status: "running" as const, input: { todos }, time: { start: 1 } }
    }
    const plan = mapper.map({ type: "message.part.updated", properties: { sessionID: "ses_1", part: todoPart } })
    expect(plan).toEqual([{
      sessionUpdate: "plan",
      entries: [
        { content: "Write the test", priority: "medium", status: "in_progress" },
        { content: "Ship", priority: "medium", status: "pending" }
      ]
    }])
    expect(mapper.map({ type: "message.part.updated", properties: { sessionID: "ses_1", part: todoPart } })).toEqual([])

    const input = { file_path: "/p/a.ts", old_string: "a", new_string: "b" }
    const edit = mapper.map({
      type: "message.part.updated",
      properties: {
        sessionID: "ses_1",
        part: {
          ...base,
          id: "prt_2",
          callID: "toolu_2",
          tool: "edit",
          metadata: { cli: { tool: "Edit", input } },
          state: { status: "completed", input, output: "ok", title: "a.ts", metadata: {}, time: { start: 1, end: 2 } }
        }
      }
    })
    expect(edit).toEqual([expect.objectContaining({
      sessionUpdate: "tool_call",
      kind: "edit",
      title: "Edit /p/a.ts",
      status: "completed",
      locations: [{ path: "/p/a.ts" }],
      content: [{ type: "diff", path: "/p/a.ts", oldText: "a", newText: "b" }]
    })])
  })
})
