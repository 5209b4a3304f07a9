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
  /** A compact boundary and its summary come before this turn (as in a view loaded after a compaction). */
  readonly boundary: boolean
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
  boundary: FastCheck.constantFrom(false, false, false, true),
  prompt: FastCheck.integer({ min: 1, max: 8000 }),
  attachment: FastCheck.boolean(),
  steps: FastCheck.array(step, { minLength: 1, maxLength: 3 })
})

const options: FastCheck.Arbitrary<SessionMemoryCompaction.WindowOptions> = FastCheck.record({
  minTokens: FastCheck.integer({ min: 0, max: 30_000 }),
  minTextMessages: FastCheck.integer({ min: 0, max: 8 }),
  maxTokens: FastCheck.integer({ min: 0, max: 50_000 }),
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
    if (t.boundary) {
      n += 1
      out.push({
        uuid: `u${n}`,
        parentUuid: null,
        isSidechain: false,
        sessionId: "s",
        timestamp: "2026-12-01T00:00:00.000Z",
        type: "system",
        subtype: "compact_boundary",
        compactMetadata: { trigger: "auto", preTokens: 1 }
      })
      out.push({ ...base(), type: "user", isCompactSummary: true, message: { role: "user", content: "summary" } })
    }
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

const sum = (xs: ReadonlyArray<number>) => xs.reduce((a, b) => a + b, 0)

/**
 * The CLI's rule, stated as a search rather than a loop: the window starts
 * at the latest index, no later than just after the covered point and no
 * earlier than the last boundary, whose suffix holds `maxTokens`, or both
 * `minTokens` and `minTextMessages`; at the boundary if none does. Then the
 * cut is made safe.
 */
const expectedStart = (
  entries: ReadonlyArray<Transcript.ChainEntry>,
  tokens: ReadonlyArray<number>,
  covered: number,
  opts: SessionMemoryCompaction.WindowOptions
): number => {
  const floor = SessionMemoryCompaction.floorOf(entries)
  const enough = (start: number) => {
    const t = sum(tokens.slice(start))
    const texts = entries.slice(start).filter(SessionMemoryCompaction.hasText).length
    return t >= opts.maxTokens! || (t >= opts.minTokens! && texts >= opts.minTextMessages!)
  }
  let start = floor
  for (let s = Math.max(covered + 1, floor); s >= floor; s--) {
    if (enough(s)) {
      start = s
      break
    }
  }
  return SessionMemoryCompaction.safeStart(entries, start)
}

const messageId = (entry: Transcript.ChainEntry) => entry.type === "assistant" ? entry.message.id : undefined
const isMessage = (entry: Transcript.ChainEntry) => Option.isSome(SessionMemoryCompaction.messageOf(entry))

/** A turn of one prompt and one text reply, `chars` characters each. */
const chat = (chars: number, extra: Partial<TurnSpec> = {}): TurnSpec => ({
  boundary: false,
  prompt: chars,
  attachment: false,
  steps: [{ thinking: 0, text: chars, tools: 0, resultLength: 0, interleave: false }],
  ...extra
})

describe("SessionMemoryCompaction.planWindow", () => {
  it("grows the window until both minimums hold or it reaches maxTokens, from the covered point, never past the last boundary; never splits a tool pair or an API message; or declines", () =>
    FastCheck.assert(
      FastCheck.property(
        FastCheck.array(turn, { minLength: 1, maxLength: 12 }),
        options,
        FastCheck.integer({ min: 1, max: 5000 }),
        FastCheck.option(FastCheck.nat(), { freq: 2 }),
        (turns, opts, summaryTokens, coveredAt) => {
          const entries = build(turns)
          const tokens = tokensOf(entries)
          const covered = coveredAt === null ? entries.length - 1 : coveredAt % entries.length
          const lastSummarized = coveredAt === null ? undefined : entries[covered]!.uuid
          const floor = SessionMemoryCompaction.floorOf(entries)
          const start = expectedStart(entries, tokens, covered, opts)
          const planned = SessionMemoryCompaction.planWindow({ entries, tokens, summary: "s", summaryTokens, lastSummarized, options: opts })
          const windowTokens = sum(tokens.slice(start))
          if (Either.isLeft(planned)) {
            const reason = planned.left
            switch (reason._tag) {
              case "OverTarget":
                expect(reason.windowTokens).toBe(windowTokens)
                expect(reason.summaryTokens + reason.windowTokens).toBeGreaterThan(opts.targetTokens!)
                break
              case "KeepsEverything":
                // Nothing after the boundary would leave the view.
                expect(entries.slice(floor, start).some(isMessage)).toBe(false)
                break
              default:
                throw new Error(`unexpected ${reason._tag}`)
            }
            return
          }
          const plan = planned.right
          expect(plan.dropped.length).toBe(start)
          expect([...plan.dropped, ...plan.window]).toEqual(entries)
          expect(plan.oldLeafUuid).toBe(entries[entries.length - 1]!.uuid)
          // Never past the last boundary; everything after the covered point is kept.
          expect(start).toBeGreaterThanOrEqual(floor)
          expect(start).toBeLessThanOrEqual(covered + 1)
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
          expect(plan.windowTokens).toBe(windowTokens)
          expect(plan.postTokens).toBe(summaryTokens + plan.windowTokens)
          expect(plan.postTokens).toBeLessThanOrEqual(opts.targetTokens!)
          expect(plan.dropped.slice(floor).some(isMessage)).toBe(true)
        }
      ),
      { numRuns: 500 }
    ))

  it("with 200 short messages keeps 10,000 tokens, not 5 messages", () => {
    // 100 turns of a prompt and a reply of 400 characters: about 100 tokens each.
    const entries = build(Array.from({ length: 100 }, () => chat(400)))
    const tokens = tokensOf(entries)
    const plan = Either.getOrThrow(SessionMemoryCompaction.planWindow({ entries, tokens, summary: "s", summaryTokens: 100 }))
    expect(entries.length).toBe(200)
    expect(plan.windowTokens).toBeGreaterThanOrEqual(10_000)
    expect(plan.windowTokens).toBeLessThan(10_000 + 2 * 101)
    expect(plan.window.filter(SessionMemoryCompaction.hasText).length).toBeGreaterThanOrEqual(5)
  })

  it("caps the window at 40,000 tokens when the text minimum is not met", () => {
    // Tool calls and results of about 2,000 tokens each, no text after the first turn.
    const toolTurn = (): TurnSpec => ({
      boundary: false,
      prompt: 40,
      attachment: false,
      steps: Array.from({ length: 3 }, () => ({ thinking: 0, text: null, tools: 1, resultLength: 8_000, interleave: false }))
    })
    const entries = build([chat(400), ...Array.from({ length: 40 }, toolTurn)])
    const tokens = tokensOf(entries)
    const plan = Either.getOrThrow(
      SessionMemoryCompaction.planWindow({ entries, tokens, summary: "s", summaryTokens: 100, options: { minTextMessages: 1_000 } })
    )
    expect(plan.windowTokens).toBeGreaterThanOrEqual(40_000)
    expect(plan.windowTokens).toBeLessThan(40_000 + 2_100)
    expect(sum(tokens)).toBeGreaterThan(200_000)
  })

  it("never reaches past the last compact boundary", () => {
    // Long turns before the boundary, three short ones after it: no window of 10,000 tokens fits after it.
    const entries = build([...Array.from({ length: 10 }, () => chat(4_000)), chat(40, { boundary: true }), chat(40), chat(40)])
    const tokens = tokensOf(entries)
    const floor = entries.findIndex((e) => e.type === "system") + 1
    expect(floor).toBeGreaterThan(0)
    const planned = SessionMemoryCompaction.planWindow({ entries, tokens, summary: "s", summaryTokens: 10 })
    expect(Either.isLeft(planned) && planned.left._tag).toBe("KeepsEverything")
    // With the minimums met after the boundary, the window stops there as usual.
    const small = Either.getOrThrow(SessionMemoryCompaction.planWindow({
      entries,
      tokens,
      summary: "s",
      summaryTokens: 10,
      options: { minTokens: 1, minTextMessages: 2 }
    }))
    expect(small.dropped.length).toBeGreaterThanOrEqual(floor)
  })

  it("keeps every message after the point the summary covers", () => {
    // 100 short turns; the summary was written after turn 40 (entry 80).
    const entries = build(Array.from({ length: 100 }, () => chat(400)))
    const tokens = tokensOf(entries)
    const covered = entries[79]!
    const plan = Either.getOrThrow(
      SessionMemoryCompaction.planWindow({ entries, tokens, summary: "s", summaryTokens: 100, lastSummarized: covered.uuid })
    )
    expect(plan.dropped.map((e) => e.uuid)).toContain(covered.uuid)
    expect(plan.window.map((e) => e.uuid)).toEqual(entries.slice(80).map((e) => e.uuid))
    expect(plan.windowTokens).toBeGreaterThan(10_000)
    // The covered point in the middle of an API message: the whole message stays.
    const split = build([chat(400), { ...chat(40), steps: [{ thinking: 2, text: 10, tools: 1, resultLength: 10, interleave: false }] }])
    const mid = split.findIndex((e) => e.type === "assistant" && e.message.content[0]?.type === "thinking")
    const kept = Either.getOrThrow(SessionMemoryCompaction.planWindow({
      entries: split,
      tokens: tokensOf(split),
      summary: "s",
      summaryTokens: 1,
      lastSummarized: split[mid]!.uuid,
      options: { minTokens: 0, minTextMessages: 0 }
    }))
    expect(kept.window[0]!.uuid).toBe(split[mid]!.uuid)
  })

  it("declines when the message the summary covers is not in the view", () => {
    const entries = build(Array.from({ length: 20 }, () => chat(400)))
    const planned = SessionMemoryCompaction.planWindow({
      entries,
      tokens: tokensOf(entries),
      summary: "s",
      summaryTokens: 1,
      lastSummarized: "compacted-away"
    })
    expect(Either.isLeft(planned) && planned.left).toEqual(SessionMemoryCompaction.Declined.CoveredMessageMissing({ uuid: "compacted-away" }))
  })

  it("moves the cut back over a call whose result the window keeps, and over a message's thinking", () => {
    const entries = build([
      chat(4000, { steps: [{ thinking: 0, text: 10, tools: 0, resultLength: 0, interleave: false }] }),
      chat(10, { steps: [{ thinking: 2, text: 10, tools: 1, resultLength: 10, interleave: false }] })
    ])
    // u1 prompt, u2 text, u3 prompt, u4 u5 thinking, u6 text, u7 tool_use, u8 tool_result
    const planned = SessionMemoryCompaction.planWindow({
      entries,
      tokens: tokensOf(entries),
      summary: "s",
      summaryTokens: 1,
      options: { minTokens: 1, maxTokens: 1 }
    })
    const plan = Either.getOrThrow(planned)
    expect(plan.window.map((e) => e.uuid)).toEqual(["u4", "u5", "u6", "u7", "u8"])
  })

  it("declines when the summary and the window are over the target, and when the window keeps everything", () => {
    const entries = build([chat(400), chat(400)])
    const tokens = tokensOf(entries)
    const over = SessionMemoryCompaction.planWindow({
      entries,
      tokens,
      summary: "s",
      summaryTokens: 1000,
      options: { minTokens: 0, minTextMessages: 2, targetTokens: 1000 }
    })
    expect(Either.isLeft(over) && over.left._tag).toBe("OverTarget")
    const all = SessionMemoryCompaction.planWindow({ entries, tokens, summary: "s", summaryTokens: 1, options: { minTokens: 0, minTextMessages: 4 } })
    expect(Either.isLeft(all) && all.left._tag).toBe("KeepsEverything")
    const none = SessionMemoryCompaction.planWindow({ entries: [], tokens: [], summary: "s", summaryTokens: 1 })
    expect(Either.isLeft(none) && none.left._tag).toBe("Empty")
  })
})
