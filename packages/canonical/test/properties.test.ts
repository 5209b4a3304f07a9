/**
 * The invariants over generated CLI sessions: turns of several steps, each
 * step a message of text, thinking and tool blocks, streamed or whole, some
 * cut off by an interrupt, tool results that fail, permission requests,
 * retries, unknown messages and bad lines, with and without state events.
 */
import { describe, expect, it } from "@effect/vitest"
import { CliMessage } from "@skein/protocol"
import type { Turn } from "@skein/session"
import { EventTranslator, History, Invariants } from "@skein/canonical"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Stream from "effect/Stream"

const session_id = "00000000-0000-4000-8000-000000000001"

type Json = Record<string, unknown>

interface Block {
  readonly kind: "text" | "thinking" | "tool_use"
  readonly text: string
  readonly chunks: number
  readonly fails: boolean
  readonly badJson: boolean
}

interface StepSpec {
  readonly blocks: ReadonlyArray<Block>
  /** Cut the step off after this many of its stream events (an interrupt). */
  readonly cutAt: number | undefined
  readonly retries: number
  readonly permission: boolean
}

interface TurnSpec {
  readonly steps: ReadonlyArray<StepSpec>
  readonly streamed: boolean
  readonly noise: ReadonlyArray<"unknown" | "unknownSystem" | "malformed" | "keepAlive">
}

interface SessionSpec {
  readonly turns: ReadonlyArray<TurnSpec>
  readonly stateEvents: boolean
}

const block: FastCheck.Arbitrary<Block> = FastCheck.record({
  kind: FastCheck.constantFrom("text", "thinking", "tool_use"),
  text: FastCheck.string({ minLength: 0, maxLength: 12 }),
  chunks: FastCheck.integer({ min: 1, max: 4 }),
  fails: FastCheck.boolean(),
  badJson: FastCheck.boolean()
})

const stepSpec: FastCheck.Arbitrary<StepSpec> = FastCheck.record({
  blocks: FastCheck.array(block, { minLength: 0, maxLength: 3 }),
  cutAt: FastCheck.option(FastCheck.integer({ min: 0, max: 12 }), { nil: undefined, freq: 4 }),
  retries: FastCheck.integer({ min: 0, max: 2 }),
  permission: FastCheck.boolean()
})

const turnSpec: FastCheck.Arbitrary<TurnSpec> = FastCheck.record({
  steps: FastCheck.array(stepSpec, { minLength: 1, maxLength: 3 }),
  streamed: FastCheck.boolean(),
  noise: FastCheck.array(FastCheck.constantFrom("unknown", "unknownSystem", "malformed", "keepAlive"), { maxLength: 3 })
})

const sessionSpec: FastCheck.Arbitrary<SessionSpec> = FastCheck.record({
  turns: FastCheck.array(turnSpec, { minLength: 1, maxLength: 3 }),
  stateEvents: FastCheck.boolean()
})

const usage = { input_tokens: 10, output_tokens: 3, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 }

/** Builds the stdout lines of one generated session, as the 2.1 CLI orders them. */
const linesOf = (spec: SessionSpec): ReadonlyArray<Json> => {
  const out: Array<Json> = []
  let clock = Date.parse("2026-01-01T00:00:00Z")
  let serial = 0
  const uuid = () => `00000000-0000-4000-8000-${String(++serial).padStart(12, "0")}`
  const stamp = () => new Date((clock += 7)).toISOString()
  const state = (s: string) => spec.stateEvents && out.push({ type: "system", subtype: "session_state_changed", state: s, uuid: uuid(), session_id })
  const stream = (event: Json, api: string) => ({ type: "stream_event", event, parent_tool_use_id: null, uuid: uuid(), session_id, api_message_id: api })
  spec.turns.forEach((turn, t) => {
    state("running")
    let interrupted = false
    for (const [s, step] of turn.steps.entries()) {
      if (interrupted) break
      for (let r = 1; r <= step.retries; r++) {
        out.push({ type: "system", subtype: "api_retry", attempt: r, max_retries: 10, retry_delay_ms: 100, error_status: 529, error: "overloaded", uuid: uuid(), session_id })
      }
      const api = `msg_${t}_${s}`
      const tools: Array<{ id: string; fails: boolean }> = []
      const events: Array<Json> = []
      const copies: Array<Json> = []
      events.push(stream({ type: "message_start", message: { id: api, type: "message", role: "assistant", model: "m", content: [], stop_reason: null, stop_sequence: null, usage } }, api))
      step.blocks.forEach((b, i) => {
        const id = `toolu_${t}_${s}_${i}`
        const content = b.kind === "text" ? { type: "text", text: "" } : b.kind === "thinking" ? { type: "thinking", thinking: "", signature: "" } : { type: "tool_use", id, name: "Bash", input: {} }
        events.push(stream({ type: "content_block_start", index: i, content_block: content }, api))
        const json = b.badJson ? "{\"command\": " : JSON.stringify({ command: b.text })
        const whole = b.kind === "tool_use" ? json : b.text
        const size = Math.ceil(whole.length / b.chunks) || 1
        for (let k = 0; k < whole.length; k += size) {
          const piece = whole.slice(k, k + size)
          const delta = b.kind === "text" ? { type: "text_delta", text: piece } : b.kind === "thinking" ? { type: "thinking_delta", thinking: piece } : { type: "input_json_delta", partial_json: piece }
          events.push(stream({ type: "content_block_delta", index: i, delta }, api))
        }
        const final = b.kind === "text" ? { type: "text", text: b.text } : b.kind === "thinking" ? { type: "thinking", thinking: b.text, signature: "s" } : { type: "tool_use", id, name: "Bash", input: b.badJson ? {} : { command: b.text } }
        const copy = { type: "assistant", message: { id: api, type: "message", role: "assistant", model: "m", content: [final], stop_reason: null, stop_sequence: null, usage }, parent_tool_use_id: null, uuid: uuid(), session_id, timestamp: stamp() }
        copies.push(copy)
        events.push(copy)
        events.push(stream({ type: "content_block_stop", index: i }, api))
        if (b.kind === "tool_use") tools.push({ id, fails: b.fails })
      })
      events.push(stream({ type: "message_delta", delta: { stop_reason: tools.length > 0 ? "tool_use" : "end_turn", stop_sequence: null }, usage: { output_tokens: 9 } }, api))
      events.push(stream({ type: "message_stop" }, api))
      const shown = turn.streamed ? events : copies
      const cut = step.cutAt !== undefined && step.cutAt < shown.length ? step.cutAt : undefined
      out.push(...shown.slice(0, cut))
      if (cut !== undefined) {
        interrupted = true
        out.push({ type: "user", message: { role: "user", content: [{ type: "text", text: "[Request interrupted by user]" }] }, parent_tool_use_id: null, uuid: uuid(), session_id, timestamp: stamp() })
        break
      }
      for (const tool of tools) {
        if (step.permission) {
          out.push({ type: "control_request", request_id: `req_${tool.id}`, request: { subtype: "can_use_tool", tool_name: "Bash", input: {}, tool_use_id: tool.id } })
        }
        out.push({ type: "user", message: { role: "user", content: [{ type: "tool_result", tool_use_id: tool.id, content: tool.fails ? "failed" : "ok", is_error: tool.fails }] }, parent_tool_use_id: null, uuid: uuid(), session_id, timestamp: stamp() })
      }
    }
    for (const noise of turn.noise) {
      if (noise === "unknown") out.push({ type: "brand_new_type", uuid: uuid(), session_id })
      if (noise === "unknownSystem") out.push({ type: "system", subtype: "brand_new_subtype", uuid: uuid(), session_id })
      if (noise === "malformed") out.push({ type: "result", subtype: "success" })
      if (noise === "keepAlive") out.push({ type: "keep_alive" })
    }
    const resultFields = { duration_ms: 1, is_error: interrupted, num_turns: 1, total_cost_usd: 0, usage, modelUsage: {}, uuid: uuid(), session_id }
    out.push(interrupted
      ? { type: "result", subtype: "error_during_execution", terminal_reason: "aborted_streaming", ...resultFields }
      : { type: "result", subtype: "success", result: "done", ...resultFields })
    state("idle")
  })
  return out
}

const decode = (lines: ReadonlyArray<Json>): ReadonlyArray<Turn.SessionEvent> =>
  lines.map((json, line) => CliMessage.decoder.decodeJson(json, line))

const translate = (spec: SessionSpec) => EventTranslator.translateAll({ cliSessionId: session_id }, decode(linesOf(spec)))

describe("EventTranslator over generated sessions", () => {
  it.prop("keeps every invariant", [sessionSpec], ([spec]) => {
    const events = translate(spec)
    expect(Invariants.check(events)).toBeUndefined()
  }, { fastCheck: { numRuns: 300 } })

  it.prop("gives one busy and one idle per turn", [sessionSpec], ([spec]) => {
    const events = translate(spec)
    const busy = events.filter((e) => e.type === "session.status" && e.properties.status.type === "busy").length
    expect(busy).toBe(spec.turns.length)
    expect(events.filter((e) => e.type === "session.idle").length).toBe(spec.turns.length)
  }, { fastCheck: { numRuns: 200 } })

  it.prop("is deterministic, and streamed or whole gives the same final parts", [sessionSpec], ([spec]) => {
    const events = translate(spec)
    expect(translate(spec)).toEqual(events)
    // Only the whole blocks survive a cut in both shapes, so compare uncut sessions.
    // A message with no block has no whole copy at all: leave those out too.
    const uncut = {
      ...spec,
      turns: spec.turns.map((t) => ({
        ...t,
        steps: t.steps.filter((s) => s.blocks.length > 0).map((s) => ({ ...s, cutAt: undefined }))
      }))
    }
    const shape = (streamed: boolean) =>
      History.collect(translate({ ...uncut, turns: uncut.turns.map((t) => ({ ...t, streamed })) }))
        .map((m) => ({ id: m.info.id, parts: m.parts.filter((p) => p.type !== "step-finish") }))
    expect(shape(true)).toEqual(shape(false))
  }, { fastCheck: { numRuns: 200 } })

  it.prop("traces every unknown message and diagnostic", [sessionSpec], ([spec]) => {
    const decoded = decode(linesOf(spec))
    const events = EventTranslator.translateAll({ cliSessionId: session_id }, decoded)
    const unknown = decoded.filter((d) => d._tag !== "Message").length
    expect(events.filter((e) => e.type === "session.cli_event" && e.properties.kind !== "message").length).toBeGreaterThanOrEqual(unknown)
  }, { fastCheck: { numRuns: 100 } })

  it.prop(
    "gives the same events whole, step by step, and as a stream in any chunking",
    [sessionSpec, FastCheck.array(FastCheck.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 8 })],
    ([spec, sizes]) => {
      const decoded = decode(linesOf(spec))
      const whole = EventTranslator.translateAll({ cliSessionId: session_id }, decoded)
      // The same inputs through `step`, one at a time: `translateAll` appends to one array instead.
      const inputs = Chunk.toReadonlyArray(Effect.runSync(Stream.runCollect(EventTranslator.withTurns(Stream.fromIterable(decoded)))))
      let state = EventTranslator.initial({ cliSessionId: session_id })
      const stepped: Array<unknown> = []
      for (const input of inputs) {
        const [next, events] = EventTranslator.step(state, input)
        state = next
        stepped.push(...events)
      }
      expect(stepped).toStrictEqual(whole)
      // The lines cut into chunks of the generated sizes, cycling.
      const chunks: Array<Chunk.Chunk<Turn.SessionEvent>> = []
      for (let at = 0, i = 0; at < decoded.length; i++) {
        const size = sizes[i % sizes.length]!
        chunks.push(Chunk.fromIterable(decoded.slice(at, at + size)))
        at += size
      }
      const streamed = Effect.runSync(Stream.runCollect(
        Stream.fromChunks(...chunks).pipe(EventTranslator.withTurns, EventTranslator.translate({ cliSessionId: session_id }))
      ))
      expect(Chunk.toReadonlyArray(streamed)).toStrictEqual(whole)
    },
    { fastCheck: { numRuns: 100 } }
  )
})
