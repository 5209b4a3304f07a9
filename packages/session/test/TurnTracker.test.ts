/**
 * The turn tracker alone: table tests over real CLI captures of both release
 * lines, and properties over random input sequences.
 */
import { describe, expect, it } from "@effect/vitest"
import { type CliMessage, CliMessage as Messages } from "@skein/protocol"
import { FastCheck as fc } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as TurnTracker from "../src/TurnTracker.js"

const fixtures = Path.join(import.meta.dirname, "..", "..", "protocol", "test", "fixtures")

/** The messages of a capture, in order (diagnostics and unknowns carry no turn signal). */
const capture = (file: string): ReadonlyArray<CliMessage.CliMessage> =>
  Fs.readFileSync(Path.join(fixtures, file), "utf8").split("\n").filter((l) => l.trim().length > 0).flatMap((line) => {
    const decoded = Messages.decodeLine(line)
    return decoded._tag === "Message" ? [decoded.message] : []
  })

const message = (m: CliMessage.CliMessage): TurnTracker.Input => ({ _tag: "Message", message: m })

/** A compact trace of outputs: W1 (write turn 1), S:host1, E:host1:idle, T+background … */
const trace = (outputs: ReadonlyArray<TurnTracker.Output>): ReadonlyArray<string> =>
  outputs.map((o) => {
    switch (o._tag) {
      case "WriteUser":
        return `W${o.turn}`
      case "TurnStarted":
        return `S:${o.origin}${o.turn}`
      case "TurnEnded":
        return `E:${o.origin}${o.turn}:${o.reason}:${o.results.length}${o.interrupted ? ":interrupted" : ""}${
          o.liveTasks.length > 0 ? `:live=${o.liveTasks.length}` : ""
        }`
      case "SetTimer":
        return `T+${o.timer}`
      case "ClearTimer":
        return `T-${o.timer}`
    }
  })

/** Feeds a capture with the host's sends placed before the messages that answer them. */
const replay = (
  messages: ReadonlyArray<CliMessage.CliMessage>,
  sends: ReadonlyMap<number, ReadonlyArray<TurnTracker.Input>>,
  options?: TurnTracker.Options
) => {
  const inputs = messages.flatMap((m, i) => [...(sends.get(i) ?? []), message(m)])
  return TurnTracker.run(TurnTracker.initial(options), inputs)
}

const send = (turn: number): TurnTracker.Input => ({ _tag: "Send", turn })

/** Index of the n-th (0-based) message matching `pred`. */
const nth = (messages: ReadonlyArray<CliMessage.CliMessage>, pred: (m: CliMessage.CliMessage) => boolean, n = 0) => {
  let seen = -1
  const i = messages.findIndex((m) => pred(m) && ++seen === n)
  if (i < 0) throw new Error("no such message in the capture")
  return i
}

const isState = (state: string) => (m: CliMessage.CliMessage) =>
  m.type === "system" && m.subtype === "session_state_changed" && m.state === state

describe("TurnTracker over real CLI 2.1.332 captures", () => {
  it("a plain turn ends at idle, once", () => {
    const messages = capture("text-thinking.ndjson")
    const [state, out] = replay(messages, new Map([[0, [send(1)]]]))
    expect(trace(out)).toEqual(["W1", "S:host1", "E:host1:idle:1"])
    expect(state.stateEvents).toBe(true)
    expect(state.active).toBeUndefined()
  })

  it("a message that moves nothing returns the very same state", () => {
    const messages = capture("text-thinking.ndjson")
    const running = nth(messages, isState("running"))
    const [busy] = replay(messages.slice(0, running + 1), new Map([[0, [send(1)]]]))
    expect(busy.active?.started).toBe(true)
    const repeats = [messages[running]!, ...messages.filter((m) => m.type === "stream_event" || m.type === "assistant")]
    for (const m of repeats) {
      const [next, out] = TurnTracker.step(busy, message(m))
      expect(next).toBe(busy)
      expect(out).toEqual([])
    }
  })

  it("a permission ask (requires_action) does not end the turn", () => {
    const messages = capture("permission.ndjson")
    const [, out] = replay(messages, new Map([[0, [send(1)]]]))
    expect(trace(out)).toEqual(["W1", "S:host1", "E:host1:idle:1"])
  })

  it("two turns in a row: the second is written only after the first's idle", () => {
    const messages = capture("compact.ndjson")
    // The host queues all three up front; the tracker writes each after the last idle.
    const [, out] = replay(messages, new Map([[0, [send(1), send(2), send(3)]]]))
    expect(trace(out)).toEqual([
      "W1",
      "S:host1",
      "E:host1:idle:1",
      "W2",
      "S:host2",
      "E:host2:idle:1",
      "W3",
      "S:host3",
      "E:host3:idle:1"
    ])
  })

  it("a background task: the first idle waits for the task, its follow-up belongs to the same turn", () => {
    const messages = capture("background-task.ndjson")
    const [, out] = replay(messages, new Map([[0, [send(1)]]]))
    expect(trace(out)).toEqual(["W1", "S:host1", "T+background", "T-background", "T+followUp", "T-followUp", "E:host1:idle:2"])
  })

  it("a background task that outlives backgroundWait: the turn ends listing it, the follow-up is a CLI turn", () => {
    const messages = capture("background-task.ndjson")
    const firstIdle = nth(messages, isState("idle"))
    const inputs = messages.flatMap((m, i): ReadonlyArray<TurnTracker.Input> => [
      ...(i === 0 ? [send(1)] : []),
      message(m),
      ...(i === firstIdle ? [{ _tag: "TimerFired", timer: "background", serial: 1 } as const] : [])
    ])
    const [, out] = TurnTracker.run(TurnTracker.initial(), inputs)
    expect(trace(out)).toEqual(["W1", "S:host1", "T+background", "E:host1:backgroundWait:1:live=1", "S:cli1", "E:cli1:idle:1"])
  })

  it("an interrupt ends the turn at the CLI's idle", () => {
    const messages = capture("interrupt.ndjson")
    const status = nth(messages, (m) => m.type === "system" && m.subtype === "status")
    const [, out] = replay(messages, new Map([[0, [send(1)]], [status, [{ _tag: "Interrupt" }]]]))
    expect(trace(out)).toEqual(["W1", "S:host1", "T+interrupt", "T-interrupt", "E:host1:idle:1:interrupted"])
  })
})

const oldRelease = Path.join(fixtures, "cli-2.0.76")

describe.runIf(Fs.existsSync(oldRelease))("TurnTracker over real CLI 2.0.76 captures (no state events)", () => {
  const files = Fs.existsSync(oldRelease) ? Fs.readdirSync(oldRelease).filter((f) => f.endsWith(".ndjson")) : []
  for (const file of files) {
    it(`${file}: every turn ends at its result`, () => {
      const messages = capture(Path.join("cli-2.0.76", file))
      const results = messages.filter((m) => m.type === "result").length
      const [state, out] = replay(messages, new Map([[0, [send(1)]]]))
      expect(state.stateEvents).toBe(false)
      const ends = out.filter((o) => o._tag === "TurnEnded")
      expect(ends.length).toBeGreaterThan(0)
      expect(ends.every((e) => e._tag === "TurnEnded" && e.reason === "result")).toBe(true)
      expect(ends.reduce((n, e) => n + (e._tag === "TurnEnded" ? e.results.length : 0), 0)).toBe(results)
      expect(state.active).toBeUndefined()
    })
  }
})

// --- properties ----------------------------------------------------------------

const sessionId = "5e55a1d0-0000-4000-8000-0000000000ff"

const stateMessage = (state: "running" | "idle" | "requires_action"): CliMessage.CliMessage => ({
  type: "system",
  subtype: "session_state_changed",
  state,
  uuid: "00000000-0000-4000-8000-000000000000",
  session_id: sessionId
})

const resultMessage: CliMessage.CliMessage = {
  type: "result",
  subtype: "success",
  is_error: false,
  duration_ms: 1,
  duration_api_ms: 1,
  num_turns: 1,
  result: "ok",
  session_id: sessionId,
  total_cost_usd: 0,
  usage: { input_tokens: 1, output_tokens: 1 },
  modelUsage: {},
  permission_denials: [],
  uuid: "00000000-0000-4000-8000-000000000001",
  stop_reason: null
}

/** Output that shows a CLI without state events at work. */
const toolResultMessage: CliMessage.CliMessage = {
  type: "user",
  message: { role: "user", content: "tool output" },
  parent_tool_use_id: null
}

const taskStarted = (id: string): CliMessage.CliMessage => ({
  type: "system",
  subtype: "task_started",
  task_id: id,
  description: `task ${id}`,
  uuid: "00000000-0000-4000-8000-000000000002",
  session_id: sessionId
})

const taskEnded = (id: string): CliMessage.CliMessage => ({
  type: "system",
  subtype: "task_updated",
  task_id: id,
  patch: { status: "completed" },
  uuid: "00000000-0000-4000-8000-000000000003",
  session_id: sessionId
})

/** A step of a generated run; `Timer` fires one of the timers set and not yet cleared. */
type Gen =
  | { readonly _tag: "Send" }
  | { readonly _tag: "State"; readonly state: "running" | "idle" | "requires_action" }
  | { readonly _tag: "Result" }
  | { readonly _tag: "TaskStarted"; readonly id: number }
  | { readonly _tag: "TaskEnded"; readonly id: number }
  | { readonly _tag: "Interrupt" }
  | { readonly _tag: "Timer"; readonly pick: number }

const genStep: fc.Arbitrary<Gen> = fc.oneof(
  fc.constant<Gen>({ _tag: "Send" }),
  fc.constantFrom<Gen>(
    { _tag: "State", state: "running" },
    { _tag: "State", state: "idle" },
    { _tag: "State", state: "requires_action" }
  ),
  fc.constant<Gen>({ _tag: "Result" }),
  fc.integer({ min: 0, max: 3 }).map((id): Gen => ({ _tag: "TaskStarted", id })),
  fc.integer({ min: 0, max: 3 }).map((id): Gen => ({ _tag: "TaskEnded", id })),
  fc.constant<Gen>({ _tag: "Interrupt" }),
  fc.nat(3).map((pick): Gen => ({ _tag: "Timer", pick }))
)

/** Whether the generated CLI prints state events at all (the 2.0 line does not). */
const genRun = fc.record({ stateEvents: fc.boolean(), steps: fc.array(genStep, { maxLength: 60 }) })

interface Observed {
  readonly outputs: ReadonlyArray<TurnTracker.Output>
  /** One entry per input, with the CLI's busy flag once the input is seen, and the outputs it caused. */
  readonly log: ReadonlyArray<{ readonly input: TurnTracker.Input; readonly busy: boolean; readonly out: ReadonlyArray<TurnTracker.Output> }>
  readonly sent: number
  readonly final: TurnTracker.State
}

/** Plays a generated run, then lets it come to rest: the CLI goes idle, its tasks end, every timer fires. */
const play = (run: typeof genRun extends fc.Arbitrary<infer A> ? A : never): Observed => {
  let state = TurnTracker.initial()
  let timers: Array<{ timer: TurnTracker.Timer; serial: number }> = []
  let busy = false
  let sent = 0
  const live = new Set<number>()
  const log: Array<Observed["log"][number]> = []
  const outputs: Array<TurnTracker.Output> = []
  const feed = (input: TurnTracker.Input) => {
    if (input._tag === "Message" && input.message.type === "system" && input.message.subtype === "session_state_changed") {
      busy = input.message.state !== "idle"
    }
    if (input._tag === "Message" && input.message.type === "result" && !run.stateEvents) busy = false
    const [next, out] = TurnTracker.step(state, input)
    state = next
    for (const o of out) {
      if (o._tag === "SetTimer") timers.push({ timer: o.timer, serial: o.serial })
      if (o._tag === "ClearTimer") timers = timers.filter((t) => !(t.timer === o.timer && t.serial === o.serial))
    }
    outputs.push(...out)
    log.push({ input, busy, out })
  }
  for (const s of run.steps) {
    switch (s._tag) {
      case "Send":
        feed({ _tag: "Send", turn: ++sent })
        break
      case "State":
        if (run.stateEvents) feed(message(stateMessage(s.state)))
        else if (s.state !== "idle") {
          busy = true
          feed(message(toolResultMessage))
        }
        break
      case "Result":
        feed(message(resultMessage))
        break
      case "TaskStarted":
        live.add(s.id)
        feed(message(taskStarted(`t${s.id}`)))
        break
      case "TaskEnded":
        live.delete(s.id)
        feed(message(taskEnded(`t${s.id}`)))
        break
      case "Interrupt":
        feed({ _tag: "Interrupt" })
        break
      case "Timer": {
        const t = timers[s.pick % Math.max(1, timers.length)]
        if (t !== undefined) feed({ _tag: "TimerFired", ...t })
      }
    }
  }
  // Come to rest: end every task, then alternate the CLI's end of work with firing timers.
  for (const id of live) feed(message(taskEnded(`t${id}`)))
  for (let i = 0; i < 200 && (state.active !== undefined || state.queue.length > 0); i++) {
    if (i % 2 === 0) {
      feed(message(run.stateEvents ? stateMessage("running") : resultMessage))
      if (run.stateEvents) feed(message(stateMessage("idle")))
    } else {
      for (const t of [...timers]) feed({ _tag: "TimerFired", ...t })
    }
  }
  return { outputs, log, sent, final: state }
}

describe("TurnTracker properties", () => {
  it("every turn that starts ends exactly once, after it started", () => {
    fc.assert(fc.property(genRun, (run) => {
      const { final, outputs } = play(run)
      const starts = new Map<number, number>()
      const ends = new Map<number, number>()
      outputs.forEach((o, i) => {
        if (o._tag === "TurnStarted") {
          expect(starts.has(o.serial)).toBe(false)
          starts.set(o.serial, i)
        }
        if (o._tag === "TurnEnded") {
          expect(ends.has(o.serial)).toBe(false)
          ends.set(o.serial, i)
        }
      })
      expect(final.active).toBeUndefined()
      expect([...ends.keys()].sort()).toEqual([...starts.keys()].sort())
      for (const [serial, at] of ends) expect(at).toBeGreaterThan(starts.get(serial)!)
    }), { numRuns: 2000 })
  })

  it("host turns are written once each, in order, never while the CLI is busy or another turn is live", () => {
    fc.assert(fc.property(genRun, (run) => {
      const { log, sent } = play(run)
      const written: Array<number> = []
      let live = 0
      for (const entry of log) {
        for (const o of entry.out) {
          if (o._tag === "WriteUser") {
            written.push(o.turn)
            // Busy: the CLI's last word, this input included, was running or requires_action.
            expect(entry.busy && run.stateEvents).toBe(false)
            expect(live).toBe(0)
          }
          if (o._tag === "TurnStarted") live++
          if (o._tag === "TurnEnded") live--
        }
      }
      expect(written).toEqual(Array.from({ length: sent }, (_, i) => i + 1))
    }), { numRuns: 2000 })
  })

  it("tasks of earlier turns never block a turn: its idle ends it when it started no task", () => {
    fc.assert(fc.property(genRun.filter((r) => r.stateEvents), (run) => {
      const { log } = play(run)
      let startedTask = false
      let live: { serial: number; started: boolean } | undefined
      for (const entry of log) {
        const { input, out } = entry
        const idle = input._tag === "Message" && input.message.type === "system" &&
          input.message.subtype === "session_state_changed" && input.message.state === "idle"
        if (idle && live !== undefined && live.started && !startedTask) {
          expect(out.some((o) => o._tag === "TurnEnded" && o.serial === live!.serial)).toBe(true)
        }
        const busy = input._tag === "Message" && input.message.type === "system" &&
          input.message.subtype === "session_state_changed" && input.message.state !== "idle"
        const result = input._tag === "Message" && input.message.type === "result"
        if (live !== undefined && (busy || result)) live.started = true
        if (live !== undefined && input._tag === "Message" && input.message.type === "system" && input.message.subtype === "task_started") {
          startedTask = true
        }
        for (const o of out) {
          if (o._tag === "TurnEnded") live = undefined
          if (o._tag === "TurnStarted") {
            // A host turn is written in the step that ended the one before: that step's input was not its own.
            live = { serial: o.serial, started: o.origin === "cli" }
            startedTask = false
          }
        }
      }
    }), { numRuns: 2000 })
  })
})
