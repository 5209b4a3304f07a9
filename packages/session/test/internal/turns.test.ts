/**
 * The turns over the live bus, fed as the reader feeds them: a read of stdout
 * at a time. Two host turns of a real capture, their events in one chunk or
 * one at a time, reach the same turns in the same order, and each turn ends
 * once, with the control answer left out of both.
 */
import { describe, expect, it } from "@effect/vitest"
import { CliMessage as Messages } from "@skein/protocol"
import { Chunk, Effect, FastCheck, Option, Stream, Tracer } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { SessionEvent } from "../../src/Turn.js"
import * as Trace from "../../src/internal/trace.js"
import * as Turns from "../../src/internal/turns.js"

const fixtures = Path.join(import.meta.dirname, "..", "..", "..", "protocol", "test", "fixtures")

/** A capture's lines as the reader decodes them, with a line that is not JSON after the first. */
const capture = (file: string): ReadonlyArray<SessionEvent> => {
  const lines = Fs.readFileSync(Path.join(fixtures, file), "utf8").split("\n").filter((l) => l.trim().length > 0)
  return [lines[0]!, "not json", ...lines.slice(1)].map((line, i) => Messages.decodeLine(line, i + 1))
}

const describeEvent = (event: SessionEvent): string =>
  event._tag === "Message"
    ? `${event.message.type}${"subtype" in event.message ? `/${String(event.message.subtype)}` : ""}`
    : event._tag

/** Sends two turns, feeds both answers in `reads`, and returns what each turn got and how it ended. */
const runTurns = (reads: (events: ReadonlyArray<SessionEvent>) => ReadonlyArray<ReadonlyArray<SessionEvent>>) =>
  Effect.gen(function*() {
    const written: Array<string> = []
    const turns = yield* Turns.make({
      tracker: {},
      writeUser: (content) => Effect.sync(() => void written.push(String(content))),
      cost: () => 0,
      ended: () => Option.none(),
    })
    const first = yield* turns.send("one")
    const second = yield* turns.send("two")
    const answer = capture("text-thinking.ndjson")
    for (const read of reads([...answer, ...answer])) yield* turns.onEvents(read)
    const summaries = [yield* first.result, yield* second.result]
    const got = [
      Chunk.toReadonlyArray(yield* Stream.runCollect(first.events)).map(describeEvent),
      Chunk.toReadonlyArray(yield* Stream.runCollect(second.events)).map(describeEvent)
    ]
    yield* Effect.yieldNow()
    return { written, got, ends: summaries.map((s) => `${s.endReason}:${s.results.length}`) }
  })

/** One turn, its answer fed in `reads`; what it got, how it ended, and the summary's figures. */
const runOneTurn = (reads: (events: ReadonlyArray<SessionEvent>) => ReadonlyArray<ReadonlyArray<SessionEvent>>) =>
  Effect.gen(function*() {
    const turns = yield* Turns.make({
      tracker: {},
      writeUser: () => Effect.void,
      cost: () => 0,
      ended: () => Option.none()
    })
    const turn = yield* turns.send("one")
    for (const read of reads(capture("text-thinking.ndjson"))) yield* turns.onEvents(read)
    const summary = yield* turn.result
    const events = Chunk.toReadonlyArray(yield* Stream.runCollect(turn.events)).map(describeEvent)
    return { events, end: `${summary.endReason}:${summary.results.length}`, text: summary.text, usage: summary.usage, busy: yield* turns.busy }
  })

/** The events cut into reads after each event whose flag is set. */
const cutAt = (cuts: ReadonlyArray<boolean>) => (events: ReadonlyArray<SessionEvent>): Array<Array<SessionEvent>> => {
  const reads: Array<Array<SessionEvent>> = [[]]
  events.forEach((event, i) => {
    reads.at(-1)!.push(event)
    if (cuts[i] === true && i < events.length - 1) reads.push([])
  })
  return reads
}

describe("turns", () => {
  it.scoped("one chunk or one event at a time: the same turns get the same events, and each ends once", () =>
    Effect.gen(function*() {
      const chunked = yield* runTurns((events) => [events])
      const single = yield* runTurns((events) => events.map((event) => [event]))
      expect(chunked).toEqual(single)
      expect(chunked.ends).toEqual(["idle:1", "idle:1"])
      expect(chunked.written).toEqual(["one", "two"])
      const [first, second] = chunked.got
      // The answer to the host's initialize is plumbing: in no turn.
      expect(first!.some((e) => e.startsWith("control_response"))).toBe(false)
      expect(first!.at(-1)).toBe("system/session_state_changed")
      expect(first!.filter((e) => e === "result/success")).toHaveLength(1)
      expect(first).toContain("Unparseable")
      // The second turn starts with the first event after the first's idle.
      expect(second).toEqual(first)
    }))

  // Most events go to their turn without the turns' lock, the rest through it:
  // wherever a read's boundaries fall, the turns must come out the same.
  // A lone turn ends in the lock-free step (its end is the only output), a queued one's end through the lock.
  it.scoped.prop(
    "any chunking of a lone turn's lines: the same events and the same summary, ended once",
    [FastCheck.array(FastCheck.boolean(), { minLength: 200, maxLength: 200 })],
    ([cuts]) =>
      Effect.gen(function*() {
        const whole = yield* runOneTurn((events) => [events])
        const chunked = yield* runOneTurn(cutAt(cuts))
        expect(chunked).toEqual(whole)
        expect(whole.end).toBe("idle:1")
        expect(whole.events.at(-1)).toBe("system/session_state_changed")
      }),
    { fastCheck: { numRuns: 25 } }
  )

  it.scoped.prop(
    "any chunking of the same lines: the same turns get the same events, and each ends once",
    [FastCheck.array(FastCheck.boolean(), { minLength: 400, maxLength: 400 })],
    ([cuts]) =>
      Effect.gen(function*() {
        const whole = yield* runTurns((events) => [events])
        const chunked = yield* runTurns(cutAt(cuts))
        expect(chunked).toEqual(whole)
        expect(chunked.ends).toEqual(["idle:1", "idle:1"])
      }),
    { fastCheck: { numRuns: 25 } }
  )

  it.scoped("a send's span is a child of the caller's, ends with the send, and the turn's span links to it", () =>
    Effect.gen(function*() {
      const spans: Array<Tracer.Span> = []
      const native = yield* Effect.tracer
      const recording = Tracer.make({
        span: (...args) => {
          const span = native.span(...args)
          spans.push(span)
          return span
        },
        context: (f, fiber) => native.context(f, fiber)
      })
      yield* Effect.gen(function*() {
        const trace = yield* Trace.make({ cwd: "/tmp", pid: 1 })
        const turns = yield* Turns.make({ tracker: {}, writeUser: () => Effect.void, cost: () => 0, ended: () => Option.none(), trace })
        const turn = yield* turns.send("one").pipe(Effect.withSpan("caller"))
        yield* turns.onEvents(capture("text-thinking.ndjson"))
        yield* turn.result
      }).pipe(Effect.withTracer(recording))
      const named = (name: string) => spans.find((span) => span.name === name)!
      const [caller, send, turn] = [named("caller"), named("Session.send"), named("Session.turn")]
      expect(Option.map(send.parent, (parent) => parent.spanId)).toEqual(Option.some(caller.spanId))
      expect(send.status._tag).toBe("Ended")
      expect(turn.links.map((link) => link.span.spanId)).toEqual([send.spanId])
      expect(turn.status._tag).toBe("Ended")
      expect(Option.map(turn.parent, (parent) => parent.spanId)).toEqual(Option.some(named("Session").spanId))
    }))
})
