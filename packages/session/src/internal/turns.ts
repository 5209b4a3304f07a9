/**
 * Runs the turn tracker over the live bus: keeps the turns' records, writes
 * each host turn's user message when the tracker says so, routes every event
 * to the turn it belongs to, runs the tracker's timers, and resolves each
 * turn once. Every step of the tracker happens under one lock, in the
 * reader's order, so an event and the boundary it causes are never reordered.
 */
import type { CliMessage } from "@skein/protocol"
import { type Clock, Duration, Effect, Option, type Queue, type Scope, type Tracer } from "effect"
import type { TurnError } from "../SessionError.js"
import type { SessionEvent, Turn, TurnSummary } from "../Turn.js"
import * as LazyFiberMap from "./lazyFiberMap.js"
import * as Trace from "./trace.js"
import * as TurnBook from "./turnBook.js"
import * as TurnLock from "./turnLock.js"
import * as TurnRecord from "./turnRecord.js"
import * as TurnRouting from "./turnRouting.js"
import * as TurnTracker from "./turnTracker.js"

export type Content = TurnRecord.Content

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
  readonly cost: () => number
  /** Why the session ended, once it has. */
  readonly ended: () => Option.Option<TurnError>
  /** With an `outputSchema`: decodes a turn's structured output from its results. */
  readonly structuredOutput?: ((results: ReadonlyArray<CliMessage.Result>) => TurnSummary["structuredOutput"]) | undefined
  /** Where each turn's span goes; none without it. */
  readonly trace?: Trace.SessionTrace | undefined
}

/** The tracker's state: stepped only under the lock (or in one synchronous run of `stepFree`), read anywhere. */
interface TrackerCell {
  state: TurnTracker.State
}

const stepCell = (cell: TrackerCell, input: TurnTracker.Input): ReadonlyArray<TurnTracker.Output> => {
  const [next, outputs] = TurnTracker.step(cell.state, input)
  cell.state = next
  return outputs
}

interface Outputs {
  readonly book: TurnBook.TurnBook
  readonly scope: Scope.Scope
  readonly timers: LazyFiberMap.LazyFiberMap<string>
  readonly writeUser: Options["writeUser"]
  /** Steps the tracker with a host input under the lock: how a timer fires. */
  readonly feed: (input: TurnTracker.Input) => Effect.Effect<void>
}

/** Carries out one tracker output: a write, a turn's start or end, a timer. */
const applyOutput = (context: Outputs, output: TurnTracker.Output): Effect.Effect<void> => {
  switch (output._tag) {
    case "WriteUser": {
      const record = context.book.find("host", output.turn)
      if (record?.content === undefined) return Effect.void
      return Effect.asVoid(context.writeUser(record.content, record.uuid).pipe(Effect.ignore, Effect.forkIn(context.scope)))
    }
    case "TurnStarted": {
      if (output.origin === "cli") return Effect.flatMap(TurnRecord.make(output.turn, "cli", undefined), context.book.start)
      const record = context.book.find("host", output.turn)
      return record === undefined ? Effect.void : context.book.start(record)
    }
    case "TurnEnded": {
      const record = context.book.find(output.origin, output.turn)
      return record === undefined ? Effect.void : context.book.end(record, output)
    }
    case "SetTimer": {
      const fire = context.feed({ _tag: "TimerFired", timer: output.timer, serial: output.serial })
      return context.timers.run(`${output.timer}:${output.serial}`, Effect.zipRight(Effect.sleep(Duration.millis(output.millis)), fire))
    }
    case "ClearTimer":
      return context.timers.remove(`${output.timer}:${output.serial}`)
  }
}

/** The outputs carried out in order: a chain of as many steps as outputs (a send has two). */
const applyAll = (context: Outputs) => (outputs: ReadonlyArray<TurnTracker.Output>): Effect.Effect<void> => {
  let chain = applyOutput(context, outputs[0]!)
  for (let i = 1; i < outputs.length; i++) {
    const output = outputs[i]!
    chain = Effect.zipRight(chain, Effect.suspend(() => applyOutput(context, output)))
  }
  return chain
}

/** Whether every output is a turn's end: those `stepFree` carries out itself, as one synchronous step. */
const onlyEnds = (outputs: ReadonlyArray<TurnTracker.Output>): outputs is ReadonlyArray<TurnRecord.Ended> => {
  for (const output of outputs) if (output._tag !== "TurnEnded") return false
  return true
}

/**
 * The leading events of a read that need no effect, stepped and queued
 * without the lock: one synchronous step, which no other fiber can cut into,
 * so the order is the lock's. An event that moves no boundary is queued on the
 * live turn; one that only ends turns (the CLI's `idle`, say) ends them here
 * too, on the session's clock (its summary, span and result are all plain
 * values). It stops before the first event whose outputs need an effect (a
 * turn starts, a write, a timer) and returns its index: that event, and the
 * rest of the read, go through the lock. A plain turn of a host's then takes
 * the lock only at its send.
 */
const stepFree = (
  cell: TrackerCell,
  book: TurnBook.TurnBook,
  lock: TurnLock.TurnLock,
  clock: Clock.Clock,
  events: ReadonlyArray<SessionEvent>
): number => {
  if (lock.holding()) return 0
  for (let i = 0; i < events.length; i++) {
    const event = events[i]!
    const prior = book.current()
    if (event._tag === "Message") {
      const [next, outputs] = TurnTracker.step(cell.state, { _tag: "Message", message: event.message })
      if (outputs.length > 0) {
        if (!onlyEnds(outputs)) return i
        cell.state = next
        // As `TurnRouting` does: the event goes to the turn it ends.
        if (prior !== undefined) TurnRecord.offer(prior, event)
        const nanos = clock.unsafeCurrentTimeNanos()
        for (const output of outputs) {
          const record = book.find(output.origin, output.turn)
          if (record !== undefined) book.unsafeEnd(record, output, nanos)
        }
        if (prior === undefined) {
          const live = book.current()
          if (live !== undefined) TurnRecord.offer(live, event)
        }
        continue
      }
      cell.state = next
    }
    if (prior !== undefined) TurnRecord.offer(prior, event)
  }
  return events.length
}

/** A span per send, without the stack trace `withSpan` would capture for it (an Error per turn). */
const noStack = { captureStackTrace: false } as const

export const make = (options: Options): Effect.Effect<Turns, never, Scope.Scope> =>
  Effect.gen(function*() {
    const lock = yield* TurnLock.make
    const book = yield* TurnBook.make(options)
    const cell: TrackerCell = { state: TurnTracker.initial(options.tracker) }
    const trace = options.trace
    const clock = yield* Effect.clock
    let sent = 0

    const scope = yield* Effect.scope
    const timers = LazyFiberMap.make<string>(scope)
    const feed = (input: TurnTracker.Input) => lock.locked(stepLocked(input))
    const apply = applyAll({ book, scope, timers, writeUser: options.writeUser, feed })

    /** One tracker step of the host's own (a send, a timer, an interrupt) and its outputs, under the lock. */
    const stepLocked = (input: TurnTracker.Input): Effect.Effect<void> =>
      Effect.suspend(() => {
        const outputs = stepCell(cell, input)
        return outputs.length === 0 ? Effect.void : apply(outputs)
      })

    /** Tracker steps and routing for a read's events; run under the lock. */
    const stepEvents = TurnRouting.routeEvents<TurnRecord.TurnRecord, TurnTracker.Output>({
      step: (event) => event._tag === "Message" ? stepCell(cell, { _tag: "Message", message: event.message }) : [],
      current: book.current,
      offer: TurnRecord.offer,
      apply
    })

    const onEvents = (events: ReadonlyArray<SessionEvent>): Effect.Effect<void> =>
      Effect.suspend(() => {
        const from = stepFree(cell, book, lock, clock, events)
        return from === events.length ? Effect.void : lock.locked(stepEvents(from === 0 ? events : events.slice(from)))
      })

    /**
     * Under the lock: the session's end is set before `failAll` takes it, so a
     * turn is either refused here or registered in time to be failed there.
     */
    const sendLocked = (content: Content, uuid: string | undefined, links: ReadonlyArray<Tracer.SpanLink>) =>
      Effect.suspend(() => {
        const end = options.ended()
        if (Option.isSome(end)) return Effect.fail(end.value)
        return Effect.flatMap(TurnRecord.make(++sent, "host", content, links, uuid), (record) => {
          book.register(record)
          const turn = TurnRecord.toTurn(record)
          const outputs = stepCell(cell, { _tag: "Send", turn: record.index })
          return outputs.length === 0 ? Effect.succeed(turn) : Effect.as(apply(outputs), turn)
        })
      })

    /**
     * `Session.send`'s span, made and ended here rather than by `withSpan`
     * (about a third of a send's operations, to make it the fiber's current
     * span, which nothing in a send reads): the caller's span is its parent,
     * and the turn links to it.
     */
    const send = (content: Content, uuid?: string | undefined) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(Effect.makeSpan("Session.send", noStack), (span) =>
          restore(lock.locked(sendLocked(content, uuid, trace === undefined ? [] : [{ _tag: "SpanLink", span, attributes: {} }]))).pipe(
            Effect.onExit((exit) => Trace.end(span, exit))
          ))
      )

    const failAll = (error: TurnError) =>
      lock.locked(Effect.gen(function*() {
        cell.state = TurnTracker.step(cell.state, { _tag: "Exited" })[0]
        yield* timers.clear
        yield* book.failAll(error)
      }))

    return {
      send,
      onEvents,
      interrupt: lock.locked(Effect.sync(() => book.current() !== undefined)).pipe(
        Effect.tap((live) => live ? feed({ _tag: "Interrupt" }) : Effect.void)
      ),
      subscribe: book.subscribe,
      busy: Effect.sync(() => cell.state.active !== undefined || cell.state.queue.length > 0),
      failAll
    } satisfies Turns
  })
