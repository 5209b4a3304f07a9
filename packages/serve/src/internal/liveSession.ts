/**
 * One served session: the CLI's session actor, and the pump that turns its
 * events into canonical ones and publishes them to the server's log.
 *
 * The pump is the one writer of the session's translator state. CLI events
 * and the host's own inputs (permission answers) go through one inbox, so
 * every event gets its place in one order. Turn boundaries come from the
 * turn rules run over the same messages, as in `EventTranslator.withTurns`.
 */
import { Canonical } from "@skein/protocol"
import type { EventLog } from "@skein/store"
import { Permissions, Session, type SessionError } from "@skein/session"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Either from "effect/Either"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Ref from "effect/Ref"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import { EventTranslator, History, TurnBoundaries } from "@skein/canonical"
import * as PermissionBroker from "../PermissionBroker.js"
import type { ServerEvents } from "../ServerEvents.js"
import type * as Questions from "./questions.js"
import { isQuestion } from "./questions.js"
import type { SessionStore } from "./sessionStore.js"
import * as StoredSession from "./storedSession.js"

export interface Ended {
  /** How many turns have reached `session.idle`. */
  readonly count: number
  /** The messages of the last finished turn (from its prompt on), as a client holds them. */
  readonly messages: ReadonlyArray<History.WithParts>
}

export interface LiveSession {
  readonly session: Session.Session
  readonly ended: SubscriptionRef.SubscriptionRef<Ended>
  /** Between a turn's `session.status` busy and its idle; the idle timer watches it. */
  readonly busy: SubscriptionRef.SubscriptionRef<boolean>
  readonly inject: (input: EventTranslator.Input) => Effect.Effect<void>
  /**
   * The messages of this turn and the one before, as shown live: the
   * transcript may not hold them yet (a prompt the CLI has not read, a reply
   * still streaming), and a client that loads the session replaces what it
   * holds with what the server lists.
   */
  readonly shown: Effect.Effect<ReadonlyArray<History.WithParts>>
  /**
   * Ends when the session can serve no more: its CLI exited, or its events
   * could not be written to the log (the pump stopped, so a CLI left running
   * would work unseen). The registry then stops it.
   */
  readonly done: Effect.Effect<void>
  /** The model a prompt last asked for (`null`: the CLI's default), so that one set is not sent again. */
  readonly model: Ref.Ref<string | null | undefined>
}

type CliInput = Extract<EventTranslator.Input, { readonly _tag: "Cli" }>

type Item =
  | { readonly _tag: "Event"; readonly event: CliInput }
  | { readonly _tag: "Input"; readonly input: EventTranslator.Input }
  /** An event of the host's own (a turn the CLI could not finish), in its place among the others. */
  | { readonly _tag: "Host"; readonly event: Canonical.CanonicalEvent }

export interface Options {
  readonly directory: string
  readonly cliSessionId: string
  readonly initial: EventTranslator.State
  readonly session: Session.SessionOptions
  readonly events: ServerEvents["Type"]
  readonly broker: PermissionBroker.PermissionBroker["Type"]
  readonly questions: Questions.Questions
  /** With a session store: the transcript is mirrored before each turn's end is reported, and asks are rows. */
  readonly store?: SessionStore | undefined
}

/** Where the turn's end is reported: the first idle status (or `session.idle`) of a batch; -1 when none. */
const turnEndIn = (events: ReadonlyArray<Canonical.CanonicalEvent>) =>
  events.findIndex((e) => e.type === "session.idle" || (e.type === "session.status" && e.properties.status.type === "idle"))

/** Starts before the message that starts the turn, ends after the one that ends it. */
const withBoundaries = (
  turns: TurnBoundaries.State,
  cli: CliInput
): readonly [TurnBoundaries.State, ReadonlyArray<EventTranslator.Input>] => {
  if (cli.event._tag !== "Message") return [turns, [cli]]
  const [next, outputs] = TurnBoundaries.step(turns, cli.event.message)
  const before: Array<EventTranslator.Input> = []
  const after: Array<EventTranslator.Input> = []
  for (const output of outputs) {
    if (output._tag === "TurnStarted") before.push({ _tag: "TurnStarted", turn: output.turn, origin: output.origin })
    else after.push({ _tag: "TurnEnded", turn: output.turn, interrupted: output.interrupted })
  }
  return [next, [...before, cli, ...after]]
}

const turnFailure = (error: SessionError.SessionSilent | SessionError.CliExited) =>
  error._tag === "SessionSilent"
    ? `the Claude Code CLI said nothing for ${Math.round(error.silentMillis / 1000)} s during a turn; it was stopped`
    : error.message

const requestIdOf = (state: EventTranslator.State, id: string): string | undefined => {
  for (const [requestId, request] of state.requests) if (request.id === id) return requestId
  return undefined
}

export const start = Effect.fn("LiveSession.start")(function*(options: Options) {
  const inbox = yield* Queue.unbounded<Item>()
  const inject = (input: EventTranslator.Input) => Effect.asVoid(Queue.offer(inbox, { _tag: "Input", input }))
  const viaBroker = PermissionBroker.permissionsFor(options.broker, options.cliSessionId, (request, resolution) =>
    // The translator emits `permission.replied` for an ask it knows of.
    inject({ _tag: "PermissionAnswered", requestId: request.requestId, reply: resolution.reply }))
  // `AskUserQuestion` arrives as a permission ask too; it is a question for the client.
  const permissions = Permissions.make((request) =>
    isQuestion(request)
      ? options.questions.ask(options.cliSessionId, request, (answer) =>
        inject(
          answer._tag === "Answered"
            ? { _tag: "QuestionAnswered", requestId: request.requestId, answers: answer.answers }
            : { _tag: "QuestionRejected", requestId: request.requestId }
        ))
      : viaBroker.canUseTool(request), { timeout: viaBroker.timeout ?? Permissions.defaultTimeout })
  // Before the CLI starts, so its finalizer runs after the CLI stopped.
  const stored = options.store === undefined ? undefined : yield* StoredSession.make({
    store: options.store,
    events: options.events,
    directory: options.directory,
    sessionID: options.initial.sessionID,
    cliSessionId: options.cliSessionId,
    configDir: options.session.configDir ?? ""
  })
  const session = yield* Session.start(options.session).pipe(Effect.provideService(Permissions.Permissions, permissions))
  const subscription = yield* session.subscribe
  // Whole chunks: one offer per read of the subscription, not one per event.
  yield* Stream.fromQueue(subscription).pipe(
    Stream.runForEachChunk((events) => {
      const receivedAt = Date.now()
      return Queue.offerAll(inbox, Chunk.map(events, (event): Item => ({ _tag: "Event", event: { _tag: "Cli", event, receivedAt } })))
    }),
    Effect.forkScoped
  )
  const ended = yield* SubscriptionRef.make<Ended>({ count: 0, messages: [] })
  const busy = yield* SubscriptionRef.make(false)

  let translator = options.initial
  let turns = TurnBoundaries.initial()
  // The turn under way (from its prompt on) and the one before it: after an
  // idle the transcript may still lag the last turn by a write.
  let shownBefore = History.folding()
  let shownNow = History.folding()

  const pumpBatch = (items: Iterable<Item>) =>
    Effect.gen(function*() {
      const out: Array<Canonical.CanonicalEvent> = []
      for (const item of items) {
        let inputs: ReadonlyArray<EventTranslator.Input>
        if (item._tag === "Host") {
          out.push(item.event)
          continue
        }
        if (item._tag === "Event") [turns, inputs] = withBoundaries(turns, item.event)
        else inputs = [item.input]
        for (const input of inputs) {
          const [next, events] = EventTranslator.step(translator, input)
          translator = next
          for (const event of events) {
            out.push(event)
            const announcing = announce(event)
            if (announcing !== undefined) yield* announcing
          }
        }
      }
      // With a store, the transcript is mirrored before the turn's end goes out: a client told
      // the turn ended can continue the session on any machine.
      const end = stored === undefined ? -1 : turnEndIn(out)
      if (stored !== undefined && end !== -1) {
        const error = yield* stored.beforeTurnEnd
        if (error !== undefined) out.splice(end, 0, error)
      }
      yield* (stored === undefined ? options.events.publish(options.directory, out) : stored.publish(out))
      for (const event of out) {
        const following = follow(event)
        if (following !== undefined) yield* following
      }
    })

  /**
   * A new ask or question is listed where clients look for it (and, with a
   * store, is a row until it is answered). Like `follow`, an effect only
   * where there is something to do: most events of a storm are deltas,
   * which run none.
   */
  const announce = (event: Canonical.CanonicalEvent): Effect.Effect<void> | undefined => {
    const asked = event.type === "permission.asked" || event.type === "question.asked"
    const requestId = asked ? requestIdOf(translator, event.properties.id) : undefined
    const recorded = stored?.record(event, requestId)
    if (!asked || requestId === undefined) return recorded
    const listed = event.type === "permission.asked"
      ? options.broker.announce(options.cliSessionId, requestId, options.directory, event.properties)
      : options.questions.announce(options.cliSessionId, requestId, options.directory, event.properties)
    return recorded === undefined ? listed : Effect.zipRight(recorded, listed)
  }

  /** The turn's messages, folded as a client folds them: what the list shows beside the transcript, and what the sync prompt answers with. */
  const follow = (event: Canonical.CanonicalEvent): Effect.Effect<void> | undefined => {
    switch (event.type) {
      case "session.status": {
        const isBusy = event.properties.status.type !== "idle"
        return SubscriptionRef.set(busy, isBusy)
      }
      case "session.idle": {
        const messages = shownNow.messages()
        shownBefore = shownNow
        shownNow = History.folding()
        return SubscriptionRef.update(ended, (e) => ({ count: e.count + 1, messages }))
      }
      default:
        // The other session.* events (and the legacy copies) are not part of a message.
        if (!event.type.startsWith("session.")) shownNow.add(event)
        return undefined
    }
  }

  // A turn the CLI never finished: silent past the watchdog's bound (and killed), or exited.
  const turnQueue = yield* session.turns
  yield* Queue.take(turnQueue).pipe(
    Effect.flatMap((turn) => Effect.either(turn.result)),
    Effect.flatMap((result) =>
      Either.isRight(result) || result.left._tag === "SessionClosed" ? Effect.void : Queue.offer(inbox, {
        _tag: "Host",
        event: Canonical.event("session.error", {
          sessionID: translator.sessionID,
          error: { name: "UnknownError", data: { message: turnFailure(result.left) } }
        })
      })
    ),
    Effect.forever,
    Effect.forkScoped
  )
  const pumpFailed = yield* Deferred.make<void>()
  yield* Queue.takeBetween(inbox, 1, 1024).pipe(
    Effect.flatMap(pumpBatch),
    Effect.forever,
    Effect.catchAll((error) => logFailed(error).pipe(Effect.zipRight(Deferred.succeed(pumpFailed, undefined)))),
    Effect.forkScoped
  )
  // When the scope closes, whatever is open is closed as an interrupted turn closes it.
  yield* Effect.addFinalizer(() =>
    Effect.suspend(() => {
      const [, events] = EventTranslator.step(translator, { _tag: "End" })
      return Effect.ignore(options.events.publish(options.directory, events))
    })
  )
  /**
   * A write the log refused (a full disk): clients are told with a
   * `session.error` and an idle status, if the log takes those, and the
   * session stops. Its finalizer closes what is open.
   */
  const logFailed = (error: EventLog.EventLogError) =>
    Effect.gen(function*() {
      yield* Effect.logError("LiveSession: the event log refused a write; stopping the session", error)
      const sessionID = translator.sessionID
      yield* Effect.ignore(options.events.publish(options.directory, [
        Canonical.event("session.error", {
          sessionID,
          error: { name: "UnknownError", data: { message: `the server's event log refused a write (${error.message}); the session was stopped` } }
        })
      ]))
    })

  const shown = Effect.sync(() => History.withShown(shownBefore.messages(), shownNow.messages()))
  const done = Effect.raceFirst(Effect.asVoid(Effect.either(session.exit)), Deferred.await(pumpFailed))
  const model = yield* Ref.make<string | null | undefined>(undefined)
  return { session, ended, busy, inject, shown, done, model } satisfies LiveSession
})
