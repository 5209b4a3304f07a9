/**
 * Runs the turn tracker over the live bus: keeps the turns' records, writes
 * each host turn's user message when the tracker says so, routes every event
 * to the turn it belongs to, runs the tracker's timers, and resolves each
 * turn once. Every step of the tracker happens under one lock, in the
 * reader's order, so an event and the boundary it causes are never reordered.
 */
import type { Anthropic, CliMessage } from "@skein/protocol"
import {
  Deferred,
  Duration,
  Effect,
  FiberMap,
  Mailbox,
  Option,
  PubSub,
  type Queue,
  type Scope,
  type Tracer
} from "effect"
import type { SessionClosed, TurnError } from "../SessionError.js"
import { type SessionEvent, summarize, type SyntheticError, syntheticError, type Turn, type TurnSummary } from "../Turn.js"
import * as Trace from "./trace.js"
import * as TurnRouting from "./turnRouting.js"
import * as TurnTracker from "./turnTracker.js"

export type Content = string | ReadonlyArray<Anthropic.ContentBlock>

export interface Turns {
  /** Queues a host turn; it is written when the CLI is free, with `uuid` when given. */
  readonly send: (content: Content, uuid?: string | undefined) => Effect.Effect<Turn, TurnError>
  /**
   * Steps the tracker with each stdout message and routes every event (unknown
   * and diagnostic ones too) to its turn, in order, under one hold of the lock.
   */
  readonly onEvents: (events: ReadonlyArray<SessionEvent>) => Effect.Effect<void>
  /** Marks the live turn interrupted; false when no turn is live. */
  readonly interrupt: Effect.Effect<boolean>
  /** Every turn from the moment of subscription on, host and CLI-initiated. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<Turn>, never, Scope.Scope>
  /** Whether a turn is live: the CLI is working, or a host turn waits to be written. */
  readonly busy: Effect.Effect<boolean>
  /** Fails every turn not yet ended, queued ones included. */
  readonly failAll: (error: TurnError) => Effect.Effect<void>
}

export interface Options {
  readonly tracker: TurnTracker.Options
  /** Writes a host turn's user message. A failure is left to the reader, which sees the exit. */
  readonly writeUser: (content: Content, uuid: string | undefined) => Effect.Effect<void, unknown>
  /** The session's cumulative cost now: a turn's cost is the difference at its end. */
  readonly cost: Effect.Effect<number>
  /** Set once the session has ended. */
  readonly ended: Effect.Effect<Option.Option<TurnError>>
  readonly closed: SessionClosed
  /** With an `outputSchema`: decodes a turn's structured output from its results. */
  readonly structuredOutput?: ((results: ReadonlyArray<CliMessage.Result>) => TurnSummary["structuredOutput"]) | undefined
  /** Where each turn's span goes; none without it. */
  readonly trace?: Trace.SessionTrace | undefined
}

interface TurnRecord {
  readonly index: number
  readonly origin: TurnTracker.Origin
  readonly content: Content | undefined
  /** The user message's uuid, when the host chose it. */
  readonly uuid: string | undefined
  readonly events: Mailbox.Mailbox<SessionEvent, TurnError>
  readonly done: Deferred.Deferred<TurnSummary, TurnError>
  /** The session's cost when the turn started; set at `TurnStarted`. */
  costBefore: number
  /** The CLI's synthetic error message in the main agent's answer, if any. */
  synthetic: SyntheticError | undefined
  /** Whether the main agent's answer held any message of the model's own. */
  modelAnswered: boolean
  /** For a host turn, the span that sent it. */
  readonly links: ReadonlyArray<Tracer.SpanLink>
}

const publicTurn = (record: TurnRecord): Turn => ({
  index: record.index,
  origin: record.origin,
  events: Mailbox.toStream(record.events),
  result: Deferred.await(record.done)
})

const newRecord = (
  index: number,
  origin: TurnTracker.Origin,
  content: Content | undefined,
  links: ReadonlyArray<Tracer.SpanLink> = [],
  uuid?: string | undefined
) =>
  Effect.gen(function*() {
    return {
      index,
      origin,
      content,
      uuid,
      events: yield* Mailbox.make<SessionEvent, TurnError>(),
      done: yield* Deferred.make<TurnSummary, TurnError>(),
      costBefore: 0,
      synthetic: undefined,
      modelAnswered: false,
      links
    } satisfies TurnRecord
  })

/** What a turn's `result` answers, from the tracker's end of it. */
const fullSummary = (
  record: TurnRecord,
  output: Extract<TurnTracker.Output, { _tag: "TurnEnded" }>,
  costBefore: number,
  structuredOutput: Options["structuredOutput"]
): TurnSummary => ({
  ...summarize(output.results, {
    costBefore,
    interrupted: output.interrupted,
    synthetic: record.modelAnswered ? undefined : record.synthetic
  }),
  origin: record.origin,
  endReason: output.reason,
  liveTasks: output.liveTasks,
  ...(structuredOutput === undefined ? {} : { structuredOutput: structuredOutput(output.results) })
})

/** Whether the main agent's answer was the model's, or the CLI's synthetic error message in its place. */
const noteAnswer = (record: TurnRecord, event: SessionEvent) => {
  if (event._tag !== "Message" || event.message.type !== "assistant" || event.message.parent_tool_use_id !== null) return
  const synthetic = syntheticError(event.message)
  if (synthetic === undefined) record.modelAnswered = true
  else record.synthetic = synthetic
}

/** Answers to the host's own requests are plumbing, not part of any turn. */
const belongsToTurn = (event: SessionEvent) => !(event._tag === "Message" && event.message.type === "control_response")

export const make = (options: Options): Effect.Effect<Turns, never, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const lock = yield* Effect.makeSemaphore(1)
    /** The tracker's state: stepped only under the lock, read anywhere. */
    let tracker = TurnTracker.initial(options.tracker)
    const timers = yield* FiberMap.make<string>()
    const announced = yield* PubSub.unbounded<Turn>()
    /** Host turns by number; CLI turns under their negated number. Queued ones included. */
    const records = new Map<number, TurnRecord>()
    let current: TurnRecord | undefined
    let sent = 0
    /** Each started turn's span, until it ends. */
    const spans = new Map<TurnRecord, Tracer.Span>()
    const trace = options.trace

    const key = (origin: TurnTracker.Origin, turn: number) => origin === "host" ? turn : -turn

    /** Ends the record's span, if it has one, as `end` says. */
    const endSpan = (record: TurnRecord, end: (trace: Trace.SessionTrace, span: Tracer.Span) => Effect.Effect<void>) =>
      Effect.suspend(() => {
        const span = spans.get(record)
        if (trace === undefined || span === undefined) return Effect.void
        spans.delete(record)
        return end(trace, span)
      })

    const ended = (record: TurnRecord, output: Extract<TurnTracker.Output, { _tag: "TurnEnded" }>) =>
      Effect.gen(function*() {
        records.delete(key(record.origin, record.index))
        if (current === record) current = undefined
        const full = fullSummary(record, output, record.costBefore, options.structuredOutput)
        yield* endSpan(record, (t, span) => t.turnEnded(span, full))
        yield* record.events.end
        yield* Deferred.succeed(record.done, full)
      })

    const apply = (output: TurnTracker.Output): Effect.Effect<void> =>
      Effect.gen(function*() {
        switch (output._tag) {
          case "WriteUser": {
            const record = records.get(output.turn)
            if (record?.content !== undefined) {
              yield* options.writeUser(record.content, record.uuid).pipe(Effect.ignore, Effect.forkIn(scope))
            }
            return
          }
          case "TurnStarted": {
            const record = output.origin === "host"
              ? records.get(output.turn)
              : yield* newRecord(output.turn, "cli", undefined)
            if (record === undefined) return
            records.set(key(record.origin, record.index), record)
            record.costBefore = yield* options.cost
            current = record
            if (trace !== undefined) spans.set(record, yield* trace.turnStarted(record, record.links))
            yield* PubSub.publish(announced, publicTurn(record))
            return
          }
          case "TurnEnded": {
            const record = records.get(key(output.origin, output.turn))
            if (record !== undefined) yield* ended(record, output)
            return
          }
          case "SetTimer": {
            const fire = feed({ _tag: "TimerFired", timer: output.timer, serial: output.serial })
            yield* FiberMap.run(timers, `${output.timer}:${output.serial}`, Effect.zipRight(Effect.sleep(Duration.millis(output.millis)), fire))
            return
          }
          case "ClearTimer":
            return yield* FiberMap.remove(timers, `${output.timer}:${output.serial}`)
        }
      })

    const step = (input: TurnTracker.Input): ReadonlyArray<TurnTracker.Output> => {
      const [next, outputs] = TurnTracker.step(tracker, input)
      tracker = next
      return outputs
    }

    const applyAll = (outputs: ReadonlyArray<TurnTracker.Output>) => Effect.forEach(outputs, apply, { discard: true })

    /** Queues the event on the turn, unless it is plumbing (an answer to the host); notes the CLI's own error messages. */
    const offerTo = (record: TurnRecord, event: SessionEvent) => {
      if (!belongsToTurn(event)) return
      noteAnswer(record, event)
      record.events.unsafeOffer(event)
    }

    /** Tracker steps and routing for a read's events; run under the lock. */
    const stepEvents = TurnRouting.routeEvents<TurnRecord, TurnTracker.Output>({
      step: (event) => event._tag === "Message" ? step({ _tag: "Message", message: event.message }) : [],
      current: () => current,
      offer: offerTo,
      apply: applyAll
    })

    /** One tracker step of the host's own (a send, a timer, an interrupt) and its outputs, under the lock. */
    const stepLocked = (input: TurnTracker.Input): Effect.Effect<void> =>
      Effect.suspend(() => {
        const outputs = step(input)
        return outputs.length === 0 ? Effect.void : applyAll(outputs)
      })

    /**
     * Whether a holder of the lock is inside its section. The section may
     * suspend (a timer's fiber interrupted, say) between a tracker step and
     * the effects of its outputs; a read must not be stepped in between.
     */
    let holding = false
    const locked = <A, E>(section: Effect.Effect<A, E>): Effect.Effect<A, E> =>
      lock.withPermits(1)(Effect.suspend(() => {
        holding = true
        return Effect.ensuring(section, Effect.sync(() => {
          holding = false
        }))
      }))

    /**
     * The leading events of a read that move no boundary, stepped and queued
     * without the lock: one synchronous step, which no other fiber can cut
     * into, so the order is the lock's. It stops before the first event whose
     * step has outputs (a turn starts or ends, a timer) and returns its index:
     * that event, and the rest of the read, go through the lock. Most events
     * of a turn (deltas, messages, state changes that end nothing) take no lock.
     */
    const stepFree = (events: ReadonlyArray<SessionEvent>): number => {
      if (holding) return 0
      for (let i = 0; i < events.length; i++) {
        const event = events[i]!
        if (event._tag === "Message") {
          const [next, outputs] = TurnTracker.step(tracker, { _tag: "Message", message: event.message })
          if (outputs.length > 0) return i
          tracker = next
        }
        if (current !== undefined) offerTo(current, event)
      }
      return events.length
    }

    const onEvents = (events: ReadonlyArray<SessionEvent>): Effect.Effect<void> =>
      Effect.suspend(() => {
        const from = stepFree(events)
        return from === events.length ? Effect.void : locked(stepEvents(from === 0 ? events : events.slice(from)))
      })

    const feed = (input: TurnTracker.Input) => locked(stepLocked(input))

    // Under the lock: the session's end is set before `failAll` takes it, so a
    // turn is either refused here or registered in time to be failed there.
    const send = (content: Content, uuid?: string | undefined) =>
      locked(Effect.gen(function*() {
        const end = yield* options.ended
        if (Option.isSome(end)) return yield* Effect.fail(end.value)
        const record = yield* newRecord(++sent, "host", content, trace === undefined ? [] : yield* Trace.callerLinks, uuid)
        records.set(record.index, record)
        yield* stepLocked({ _tag: "Send", turn: record.index })
        return publicTurn(record)
      })).pipe(Effect.withSpan("Session.send"))

    const failAll = (error: TurnError) =>
      locked(Effect.gen(function*() {
        tracker = TurnTracker.step(tracker, { _tag: "Exited" })[0]
        yield* FiberMap.clear(timers)
        const open = [...records.values()]
        records.clear()
        current = undefined
        for (const record of open) {
          yield* endSpan(record, (t, span) => t.turnFailed(span, error))
          yield* record.events.fail(error)
          yield* Deferred.fail(record.done, error)
        }
      }))

    return {
      send,
      onEvents,
      interrupt: locked(Effect.sync(() => current !== undefined)).pipe(
        Effect.tap((live) => live ? feed({ _tag: "Interrupt" }) : Effect.void)
      ),
      subscribe: PubSub.subscribe(announced),
      busy: Effect.sync(() => tracker.active !== undefined || tracker.queue.length > 0),
      failAll
    } satisfies Turns
  })
