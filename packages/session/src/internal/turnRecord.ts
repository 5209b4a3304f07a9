/**
 * One turn as the session keeps it while it is live: the caller's view of it
 * (its events and its result), what the host sent, and what the turn's end
 * needs to build its summary.
 */
import type { Anthropic, CliMessage } from "@skein/protocol"
import { Deferred, Effect, FiberId, Mailbox, type Tracer } from "effect"
import type { TurnError } from "../SessionError.js"
import { type SessionEvent, summarize, type SyntheticError, syntheticError, type Turn, type TurnSummary } from "../Turn.js"
import type * as TurnTracker from "./turnTracker.js"

export type Content = string | ReadonlyArray<Anthropic.ContentBlock>

export interface TurnRecord {
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
  /** The caller's view, made once: the sender and the turns' subscribers share it. */
  view: Turn | undefined
}

export type Ended = Extract<TurnTracker.Output, { _tag: "TurnEnded" }>

export const make = (
  index: number,
  origin: TurnTracker.Origin,
  content: Content | undefined,
  links: ReadonlyArray<Tracer.SpanLink> = [],
  uuid?: string | undefined
): Effect.Effect<TurnRecord> =>
  Effect.map(Mailbox.make<SessionEvent, TurnError>(), (events) => ({
    index,
    origin,
    content,
    uuid,
    events,
    done: Deferred.unsafeMake<TurnSummary, TurnError>(FiberId.none),
    costBefore: 0,
    synthetic: undefined,
    modelAnswered: false,
    links,
    view: undefined
  }))

/**
 * The caller's view of the turn. Its `events` stream is made when first
 * asked for: a caller that waits only for the result (most, at scale) never
 * pays for a stream's channel.
 */
export const toTurn = (record: TurnRecord): Turn => {
  if (record.view !== undefined) return record.view
  let events: Turn["events"] | undefined
  return record.view = {
    index: record.index,
    origin: record.origin,
    get events() {
      return events ??= Mailbox.toStream(record.events)
    },
    result: Deferred.await(record.done)
  }
}

/** What a turn's `result` answers, from the tracker's end of it. */
export const summary = (
  record: TurnRecord,
  output: Ended,
  structuredOutput: ((results: ReadonlyArray<CliMessage.Result>) => TurnSummary["structuredOutput"]) | undefined
): TurnSummary => ({
  ...summarize(output.results, {
    costBefore: record.costBefore,
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

/** Queues the event on the turn, unless it is plumbing (an answer to the host's own request); notes the CLI's own error messages. */
export const offer = (record: TurnRecord, event: SessionEvent): void => {
  if (event._tag === "Message" && event.message.type === "control_response") return
  noteAnswer(record, event)
  record.events.unsafeOffer(event)
}
