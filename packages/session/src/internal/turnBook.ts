/**
 * The session's live turns: host turns queued or running, the CLI's own
 * turns while they run, the one live now, each started turn's span, and the
 * announcement of every turn that starts. It is changed only under the
 * turns' lock (see `turns`), so its plain fields need no lock of their own.
 */
import type { CliMessage } from "@skein/protocol"
import { Clock, Deferred, Effect, Exit, type Queue, type Scope, type Tracer } from "effect"
import type { TurnError } from "../SessionError.js"
import type { Turn, TurnSummary } from "../Turn.js"
import * as LazyHub from "./lazyHub.js"
import type * as Trace from "./trace.js"
import * as TurnRecord from "./turnRecord.js"
import type * as TurnTracker from "./turnTracker.js"

export interface Options {
  /** The session's cumulative cost now: a turn's cost is the difference at its end. */
  readonly cost: () => number
  readonly structuredOutput?: ((results: ReadonlyArray<CliMessage.Result>) => TurnSummary["structuredOutput"]) | undefined
  readonly trace?: Trace.SessionTrace | undefined
}

export interface TurnBook {
  /** The turn live now: the one its events go to. */
  readonly current: () => TurnRecord.TurnRecord | undefined
  /** Keeps a host turn from its send on, so it can be started, and failed while still queued. */
  readonly register: (record: TurnRecord.TurnRecord) => void
  readonly find: (origin: TurnTracker.Origin, turn: number) => TurnRecord.TurnRecord | undefined
  /** The record becomes the live turn: its cost base, its span, its announcement. */
  readonly start: (record: TurnRecord.TurnRecord) => Effect.Effect<void>
  /** Resolves the turn as the tracker ended it. */
  readonly end: (record: TurnRecord.TurnRecord, output: TurnRecord.Ended) => Effect.Effect<void>
  /** `end` as a synchronous step, at `nanos` on the session's clock: for a step that holds no lock and must not yield. */
  readonly unsafeEnd: (record: TurnRecord.TurnRecord, output: TurnRecord.Ended, nanos: bigint) => void
  /** Fails every turn not yet ended, queued ones included. */
  readonly failAll: (error: TurnError) => Effect.Effect<void>
  readonly subscribe: Effect.Effect<Queue.Dequeue<Turn>, never, Scope.Scope>
}

/** Host turns by number; CLI turns under their negated number. */
const key = (origin: TurnTracker.Origin, turn: number) => origin === "host" ? turn : -turn

export const make = (options: Options): Effect.Effect<TurnBook> =>
  Effect.sync(() => {
    const announced = LazyHub.make<Turn>()
    const records = new Map<number, TurnRecord.TurnRecord>()
    const spans = new Map<TurnRecord.TurnRecord, Tracer.Span>()
    let current: TurnRecord.TurnRecord | undefined
    /** Counted from before a subscription exists to after it is gone, so no subscriber misses a turn. */
    let subscribers = 0
    const trace = options.trace

    /** Ends the record's span, if it has one, as `end` says. */
    const endSpan = (record: TurnRecord.TurnRecord, end: (trace: Trace.SessionTrace, span: Tracer.Span) => Effect.Effect<void>) =>
      Effect.suspend(() => {
        const span = spans.get(record)
        if (trace === undefined || span === undefined) return Effect.void
        spans.delete(record)
        return end(trace, span)
      })

    const start = (record: TurnRecord.TurnRecord): Effect.Effect<void> =>
      Effect.suspend(() => {
        records.set(key(record.origin, record.index), record)
        record.costBefore = options.cost()
        current = record
        // With no subscriber the announcement reaches no one: a CLI turn's view is then never made.
        const announce = () => subscribers > 0 ? announced.publish(TurnRecord.toTurn(record)) : Effect.void
        if (trace === undefined) return announce()
        return Effect.flatMap(trace.turnStarted(record, record.links), (span) => {
          spans.set(record, span)
          return announce()
        })
      })

    const unsafeEnd = (record: TurnRecord.TurnRecord, output: TurnRecord.Ended, nanos: bigint) => {
      records.delete(key(record.origin, record.index))
      if (current === record) current = undefined
      const full = TurnRecord.summary(record, output, options.structuredOutput)
      const span = spans.get(record)
      if (trace !== undefined && span !== undefined) {
        spans.delete(record)
        trace.unsafeTurnEnded(span, full, nanos)
      }
      record.events.unsafeDone(Exit.void)
      Deferred.unsafeDone(record.done, Exit.succeed(full))
    }

    const end = (record: TurnRecord.TurnRecord, output: TurnRecord.Ended) =>
      Effect.flatMap(Clock.currentTimeNanos, (nanos) => Effect.sync(() => unsafeEnd(record, output, nanos)))

    const failAll = (error: TurnError) =>
      Effect.gen(function*() {
        const open = [...records.values()]
        records.clear()
        current = undefined
        for (const record of open) {
          yield* endSpan(record, (t, span) => t.turnFailed(span, error))
          yield* record.events.fail(error)
          yield* Deferred.fail(record.done, error)
        }
      })

    return {
      current: () => current,
      register: (record) => void records.set(key(record.origin, record.index), record),
      find: (origin, turn) => records.get(key(origin, turn)),
      start,
      end,
      unsafeEnd,
      failAll,
      subscribe: Effect.zipRight(
        Effect.acquireRelease(Effect.sync(() => subscribers++), () => Effect.sync(() => subscribers--)),
        announced.subscribe
      )
    } satisfies TurnBook
  })
