/**
 * The canonical event translator: a pure state machine from a skein
 * session's events (decoded CLI messages, unknown messages and diagnostics,
 * turn boundaries, permission and question asks and answers) to opencode's
 * `{type, properties}` events.
 *
 * `step(state, input)` returns the next state and the events; it does no IO
 * and reads no clock, so the same inputs always give the same events and ids
 * (see `Ids`). `translate` runs it over a Stream.
 */
import type { Canonical, CliMessage, Control } from "@skein/protocol"
import { Canonical as C } from "@skein/protocol"
import type { Turn } from "@skein/session"
import * as Stream from "effect/Stream"
import { onAssistant } from "./internal/assistantMessages.js"
import { legacyEvent } from "./internal/legacy.js"
import { onToolProgress, onUnknown } from "./internal/otherMessages.js"
import type { Answer } from "./internal/requests.js"
import { onPrompted } from "./internal/prompts.js"
import { onAnswer, onRequest } from "./internal/requests.js"
import * as S from "./internal/state.js"
import { onStreamEvent } from "./internal/streamEvents.js"
import { onResult, onSystem } from "./internal/systemMessages.js"
import * as TurnBoundaries from "./TurnBoundaries.js"
import { onEnd, onTurnEnded, onTurnStarted } from "./internal/turns.js"
import { onUser } from "./internal/userMessages.js"

export type Options = S.Options
export type HostInfo = S.HostInfo
export type State = S.State

export type Input =
  /**
   * One decoded stdout message, unknown message or diagnostic. `receivedAt`
   * (epoch ms) dates only what the CLI stamps late or never: a streamed
   * message's `time.created`, a retry's `next`.
   */
  | { readonly _tag: "Cli"; readonly event: Turn.SessionEvent; readonly receivedAt?: number | undefined }
  | { readonly _tag: "TurnStarted"; readonly turn: number; readonly origin: "host" | "cli" }
  /** The authoritative end of a turn. */
  | { readonly _tag: "TurnEnded"; readonly turn: number; readonly interrupted: boolean }
  /** The host saw a permission (or question) request; the CLI's own `control_request` has the same effect. */
  | { readonly _tag: "PermissionAsked"; readonly requestId: string; readonly request: Control.CliRequestPayload }
  | { readonly _tag: "PermissionAnswered"; readonly requestId: string; readonly reply: Canonical.PermissionReply }
  | { readonly _tag: "QuestionAnswered"; readonly requestId: string; readonly answers: ReadonlyArray<ReadonlyArray<string>> }
  | { readonly _tag: "QuestionRejected"; readonly requestId: string }
  /** The host wrote a prompt under `uuid` (see `internal/prompts`): its user message shows live. */
  | { readonly _tag: "Prompted"; readonly prompt: S.Prompt }
  /** The host renamed the session: later `session.updated` events carry the title. Emits nothing: the host announces the rename itself. */
  | { readonly _tag: "Retitled"; readonly title: string }
  /** No more input: every open part closes as an interrupted turn closes it. */
  | { readonly _tag: "End" }

export const initial = (options: Options): State => S.initial(options)

/** The `ses_` id of the translator's session. */
export const sessionID = (state: State): string => state.sessionID

/** The CLI's session UUID behind the `ses_` id. */
export const cliSessionId = (state: State): string => state.options.cliSessionId

export const step = (state: State, input: Input): S.Step => {
  const events: S.Events = []
  const next = apply(state, events, input)
  return [next, events]
}

const apply = (state: State, events: S.Events, input: Input): State => {
  switch (input._tag) {
    case "Cli":
      return onCli(state, events, input.event, input.receivedAt)
    case "TurnStarted":
      return onTurnStarted(state, events)
    case "TurnEnded":
      return onTurnEnded(state, events, { interrupted: input.interrupted })
    case "PermissionAsked":
      return onRequest(state, events, input.requestId, input.request)
    case "PermissionAnswered":
      return answer(state, events, input.requestId, { _tag: "Permission", reply: input.reply })
    case "QuestionAnswered":
      return answer(state, events, input.requestId, { _tag: "Question", answers: input.answers })
    case "QuestionRejected":
      return answer(state, events, input.requestId, { _tag: "Rejected" })
    case "Prompted":
      return onPrompted(state, events, input.prompt)
    case "Retitled":
      return S.retitled(state, input.title)
    case "End":
      return onEnd(state, events)
  }
}

const answer = (state: State, events: S.Events, requestId: string, value: Answer) => onAnswer(state, events, requestId, value)

const onCli = (state: State, events: S.Events, event: Turn.SessionEvent, receivedAt: number | undefined): State => {
  const before = events.length
  let next: State
  if (event._tag === "Message") {
    if (state.options.legacy === true) {
      const flat = legacyEvent(state.sessionID, event.message)
      if (flat !== undefined) events.push(flat)
    }
    const start = events.length
    next = onMessage(state, events, event.message, receivedAt ?? state.clock)
    if (events.length > start) return next
  } else if (event._tag === "Unknown") {
    next = onUnknown(state, events, event, receivedAt ?? state.clock)
    if (events.length > before) return next
  } else {
    next = state
  }
  // Nothing in the input is dropped without a trace.
  events.push(traceOf(state.sessionID, event))
  return next
}

const traceOf = (sessionID: string, event: Turn.SessionEvent): Canonical.CanonicalEvent => {
  switch (event._tag) {
    case "Message": {
      const message = event.message
      const subtype = "subtype" in message && typeof message.subtype === "string" ? message.subtype : undefined
      return C.event(
        "session.cli_event",
        subtype !== undefined
          ? { sessionID, kind: "message", cliType: message.type, cliSubtype: subtype, data: message }
          : { sessionID, kind: "message", cliType: message.type, data: message }
      )
    }
    case "Unknown":
      return C.event("session.cli_event", {
        sessionID,
        kind: "unknown",
        ...(event.type !== undefined ? { cliType: event.type } : {}),
        ...(event.subtype !== undefined ? { cliSubtype: event.subtype } : {}),
        data: event.json
      })
    case "Malformed":
      return C.event("session.cli_event", {
        sessionID,
        kind: "Malformed",
        cliType: event.type,
        ...(event.subtype !== undefined ? { cliSubtype: event.subtype } : {}),
        data: event.raw,
        issue: event.issue
      })
    case "Unparseable":
      return C.event("session.cli_event", { sessionID, kind: "Unparseable", data: event.raw, issue: event.error })
    case "Oversized":
      return C.event("session.cli_event", { sessionID, kind: "Oversized", data: null, issue: JSON.stringify(event) })
  }
}

/** Messages of a subagent (`parent_tool_use_id` set) belong to its own chain: they are traced, not merged. */
const isSubagent = (message: CliMessage.CliMessage) =>
  "parent_tool_use_id" in message && message.parent_tool_use_id !== null && message.parent_tool_use_id !== undefined

const onMessage = (state: State, events: S.Events, message: CliMessage.CliMessage, now: number): State => {
  if (isSubagent(message)) return state
  switch (message.type) {
    case "stream_event":
      return onStreamEvent(state, events, message, now)
    case "assistant":
      return onAssistant(state, events, {
        message: message.message,
        timestamp: S.parseTime(S.field(message, "timestamp")),
        blockIndex: undefined
      })
    case "user":
      return onUser(state, events, {
        message: message.message,
        uuid: message.uuid,
        timestamp: S.parseTime(message.timestamp),
        synthetic: message.isSynthetic === true || message.isReplay === true,
        toolUseResult: message.tool_use_result
      })
    case "system":
      return onSystem(state, events, message, now)
    case "result":
      return onResult(state, events, message)
    case "control_request":
      return onRequest(state, events, message.request_id, message.request)
    case "control_cancel_request":
      return onAnswer(state, events, message.request_id, { _tag: "Rejected" })
    case "tool_progress":
      return onToolProgress(state, events, message)
    default:
      return state
  }
}

// ---------------------------------------------------------------------------
// Streams and whole inputs
// ---------------------------------------------------------------------------

/** The translator as a Stream transducer. */
export const translate = (options: Options) => <E, R>(inputs: Stream.Stream<Input, E, R>): Stream.Stream<Canonical.CanonicalEvent, E, R> =>
  inputs.pipe(
    Stream.mapAccum(initial(options), (state, input) => step(state, input)),
    Stream.mapConcat((events) => events)
  )

/**
 * CLI events alone (a capture, a replay) as translator inputs: the turn
 * boundaries come from the turn rules run over the same messages, and an
 * `End` follows the last one.
 */
export const withTurns = <E, R>(events: Stream.Stream<Turn.SessionEvent, E, R>): Stream.Stream<Input, E, R> =>
  events.pipe(
    Stream.mapAccum(TurnBoundaries.initial(), (turns, event): readonly [TurnBoundaries.State, ReadonlyArray<Input>] => {
      if (event._tag !== "Message") return [turns, [{ _tag: "Cli", event }]]
      const [next, outputs] = TurnBoundaries.step(turns, event.message)
      return [next, boundaryInputs({ _tag: "Cli", event }, outputs)]
    }),
    Stream.mapConcat((inputs) => inputs),
    Stream.concat(Stream.succeed<Input>({ _tag: "End" }))
  )

/** Starts come before the message that starts the turn; ends after the message that ends it. */
const boundaryInputs = (cli: Input, outputs: ReadonlyArray<TurnBoundaries.Output>): ReadonlyArray<Input> => {
  const before: Array<Input> = []
  const after: Array<Input> = []
  for (const output of outputs) {
    if (output._tag === "TurnStarted") before.push({ _tag: "TurnStarted", turn: output.turn, origin: output.origin })
    else after.push({ _tag: "TurnEnded", turn: output.turn, interrupted: output.interrupted })
  }
  return [...before, cli, ...after]
}

/** Translates a whole array of CLI events (a capture) with turn boundaries and a final `End`. */
export const translateAll = (options: Options, events: ReadonlyArray<Turn.SessionEvent>): ReadonlyArray<Canonical.CanonicalEvent> => {
  let state = initial(options)
  let turns = TurnBoundaries.initial()
  // Every step appends to one array: the same events as `step` one input at a time, without a tuple and array per input.
  const out: S.Events = []
  for (const event of events) {
    const cli: Input = { _tag: "Cli", event }
    if (event._tag !== "Message") {
      state = apply(state, out, cli)
      continue
    }
    const [next, outputs] = TurnBoundaries.step(turns, event.message)
    turns = next
    if (outputs.length === 0) {
      state = apply(state, out, cli)
      continue
    }
    for (const input of boundaryInputs(cli, outputs)) state = apply(state, out, input)
  }
  apply(state, out, { _tag: "End" })
  return out
}

/** The CLI session UUID a capture's messages carry, if any. */
export const cliSessionIdOf = (events: ReadonlyArray<Turn.SessionEvent>): string | undefined => {
  for (const event of events) {
    if (event._tag === "Message" && "session_id" in event.message && typeof event.message.session_id === "string") {
      return event.message.session_id
    }
  }
  return undefined
}
