import { describe, expect, it } from "@effect/vitest"
import type { Transcript } from "@skein/protocol"
import { Either, FastCheck, Option } from "effect"
import * as SessionMemoryCompaction from "../src/SessionMemoryCompaction.js"
import * as TokenCounter from "../src/TokenCounter.js"

// ---------------------------------------------------------------------------
// Random transcripts: prompts, API messages written one entry per block
// (thinking, text, parallel tool calls), tool results, attachments.
// ---------------------------------------------------------------------------

interface Step {
  readonly thinking: number
  readonly text: number | null
  readonly tools: number
  readonly resultLength: number
  /** Write the first call's result before the message's next block (the entries of one message then interleave). */
  readonly interleave: boolean
}

interface TurnSpec {
  readonly prompt: number
  readonly attachment: boolean
  readonly steps: ReadonlyArray<Step>
}

const step: FastCheck.Arbitrary<Step> = FastCheck.record({
  thinking: FastCheck.integer({ min: 0, max: 2 }),
  text: FastCheck.option(FastCheck.integer({ min: 1, max: 4000 })),
  tools: FastCheck.integer({ min: 0, max: 3 }),
  resultLength: FastCheck.integer({ min: 0, max: 20_000 }),
  interleave: FastCheck.boolean()
})

const turn: FastCheck.Arbitrary<TurnSpec> = FastCheck.record({
  prompt: FastCheck.integer({ min: 1, max: 8000 }),
  attachment: FastCheck.boolean(),
  steps: FastCheck.array(step, { minLength: 1, maxLength: 3 })
})

const options: FastCheck.Arbitrary<SessionMemoryCompaction.WindowOptions> = FastCheck.record({
  minTokens: FastCheck.integer({ min: 0, max: 30_000 }),
  minTextMessages: FastCheck.integer({ min: 0, max: 8 }),
  targetTokens: FastCheck.integer({ min: 0, max: 60_000 })
})

const build = (turns: ReadonlyArray<TurnSpec>): Array<Transcript.ChainEntry> => {
  const out: Array<Transcript.ChainEntry> = []
  let n = 0
  const base = () => {
    n += 1
    const parentUuid = out.length === 0 ? null : out[out.length - 1]!.uuid
    return { uuid: `u${n}`, parentUuid, isSidechain: false, sessionId: "s", timestamp: "2026-12-01T00:00:00.000Z" }
  }
  const user = (content: Transcript.UserEntry["message"]["content"]) =>
    out.push({ ...base(), type: "user", message: { role: "user", content } })
  const assistant = (id: string, block: Transcript.AssistantEntry["message"]["content"][number]) =>
    out.push({
      ...base(),
      type: "assistant",
      message: {
        id,
        type: "message",
        role: "assistant",
        model: "m",
        content: [block],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 10, output_tokens: 10 }
      }
    })
  const result = (id: string, length: number) =>
    user([{ type: "tool_result", tool_use_id: id, content: "r".repeat(length) }])
  turns.forEach((t, ti) => {
    user("p".repeat(t.prompt))
    if (t.attachment) out.push({ ...base(), type: "attachment", attachment: { type: "date" } })
    t.steps.forEach((s, si) => {
      const id = `msg_${ti}_${si}`
      for (let i = 0; i < s.thinking; i++) assistant(id, { type: "thinking", thinking: "t".repeat(300), signature: "x" })
      if (s.text !== null || (s.thinking === 0 && s.tools === 0)) assistant(id, { type: "text", text: "a".repeat(s.text ?? 10) })
      const calls = Array.from({ length: s.tools }, (_, i) => `toolu_${ti}_${si}_${i}`)
      calls.forEach((call, i) => {
        assistant(id, { type: "tool_use", id: call, name: "Bash", input: { command: "c".repeat(40) } })
        if (i === 0 && s.interleave && calls.length > 1) result(call, s.resultLength)
      })
      calls.forEach((call, i) => {
        if (!(i === 0 && s.interleave && calls.length > 1)) result(call, s.resultLength)
      })
    })
  })
  return out
}

const tokensOf = (entries: ReadonlyArray<Transcript.ChainEntry>) =>
  entries.map((entry) => Option.match(SessionMemoryCompaction.messageOf(entry), { onNone: () => 0, onSome: TokenCounter.estimateMessage }))

/** Whether a window holds `minTokens` tokens or `minTextMessages` text messages. */
const meets = (
  window: ReadonlyArray<Transcript.ChainEntry>,
  tokens: ReadonlyArray<number>,
  opts: SessionMemoryCompaction.WindowOptions
) =>
  tokens.reduce((a, b) => a + b, 0) >= opts.minTokens! ||
  window.filter(SessionMemoryCompaction.hasText).length >= opts.minTextMessages!

const messageId = (entry: Transcript.ChainEntry) => entry.type === "assistant" ? entry.message.id : undefined

describe("SessionMemoryCompaction.planWindow", () => {
  it("never splits a tool pair or an API message, meets its minimum, or declines", () =>
    FastCheck.assert(
      FastCheck.property(
        FastCheck.array(turn, { minLength: 1, maxLength: 12 }),
        options,
        FastCheck.integer({ min: 1, max: 5000 }),
        (turns, opts, summaryTokens) => {
          const entries = build(turns)
          const tokens = tokensOf(entries)
          const planned = SessionMemoryCompaction.planWindow({ entries, tokens, summary: "s", summaryTokens, options: opts })
          if (Either.isLeft(planned)) {
            const reason = planned.left
            switch (reason._tag) {
              case "OverTarget":
                expect(reason.summaryTokens + reason.windowTokens).toBeGreaterThan(opts.targetTokens!)
                break
              case "KeepsEverything": {
                // No safe cut that drops a message leaves a window that meets the minimum.
                for (let cut = 1; cut <= entries.length; cut++) {
                  const dropsMessage = entries.slice(0, cut).some((e) => Option.isSome(SessionMemoryCompaction.messageOf(e)))
                  if (!dropsMessage || SessionMemoryCompaction.safeStart(entries, cut) !== cut) continue
                  expect(meets(entries.slice(cut), tokens.slice(cut), opts)).toBe(false)
                }
                break
              }
              default:
                throw new Error(`unexpected ${reason._tag}`)
            }
            return
          }
          const plan = planned.right
          expect([...plan.dropped, ...plan.window]).toEqual(entries)
          expect(plan.oldLeafUuid).toBe(entries[entries.length - 1]!.uuid)
          // No result without its call, no message cut in two.
          const droppedCalls = new Set(plan.dropped.flatMap(SessionMemoryCompaction.toolUses))
          for (const entry of plan.window) {
            for (const id of SessionMemoryCompaction.toolResults(entry)) expect(droppedCalls.has(id)).toBe(false)
          }
          const droppedMessages = new Set(plan.dropped.map(messageId).filter((id) => id !== undefined))
          for (const entry of plan.window) {
            const id = messageId(entry)
            if (id !== undefined) expect(droppedMessages.has(id)).toBe(false)
          }
          // The window meets a minimum, and it all fits.
          expect(meets(plan.window, tokens.slice(plan.dropped.length), opts)).toBe(true)
          expect(plan.windowTokens).toBe(tokens.slice(plan.dropped.length).reduce((a, b) => a + b, 0))
          expect(plan.postTokens).toBe(summaryTokens + plan.windowTokens)
          expect(plan.postTokens).toBeLessThanOrEqual(opts.targetTokens!)
          expect(plan.dropped.some((e) => Option.isSome(SessionMemoryCompaction.messageOf(e)))).toBe(true)
        }
      ),
      { numRuns: 500 }
    ))

  it("moves the cut back over a call whose result the window keeps, and over a message's thinking", () => {
    const entries = build([
      { prompt: 4000, attachment: false, steps: [{ thinking: 0, text: 10, tools: 0, resultLength: 0, interleave: false }] },
      { prompt: 10, attachment: false, steps: [{ thinking: 2, text: 10, tools: 1, resultLength: 10, interleave: false }] }
    ])
    // u1 prompt, u2 text, u3 prompt, u4 u5 thinking, u6 text, u7 tool_use, u8 tool_result
    const planned = SessionMemoryCompaction.planWindow({
      entries,
      tokens: tokensOf(entries),
      summary: "s",
      summaryTokens: 1,
      options: { minTokens: 1, minTextMessages: 99 }
    })
    const plan = Either.getOrThrow(planned)
    expect(plan.window.map((e) => e.uuid)).toEqual(["u4", "u5", "u6", "u7", "u8"])
  })

  it("declines when the summary and the window are over the target, and when the window keeps everything", () => {
    const entries = build([
      { prompt: 400, attachment: false, steps: [{ thinking: 0, text: 400, tools: 0, resultLength: 0, interleave: false }] },
      { prompt: 400, attachment: false, steps: [{ thinking: 0, text: 400, tools: 0, resultLength: 0, interleave: false }] }
    ])
    const tokens = tokensOf(entries)
    const over = SessionMemoryCompaction.planWindow({
      entries,
      tokens,
      summary: "s",
      summaryTokens: 1000,
      options: { minTextMessages: 2, targetTokens: 1000 }
    })
    expect(Either.isLeft(over) && over.left._tag).toBe("OverTarget")
    const all = SessionMemoryCompaction.planWindow({ entries, tokens, summary: "s", summaryTokens: 1, options: { minTextMessages: 4 } })
    expect(Either.isLeft(all) && all.left._tag).toBe("KeepsEverything")
    const none = SessionMemoryCompaction.planWindow({ entries: [], tokens: [], summary: "s", summaryTokens: 1 })
    expect(Either.isLeft(none) && none.left._tag).toBe("Empty")
  })
})
