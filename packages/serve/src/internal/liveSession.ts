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
import { EventTranslator, type History } from "@skein/canonical"
import * as PermissionBroker from "../PermissionBroker.js"
import type { ServerEvents } from "../ServerEvents.js"
import type * as Questions from "./questions.js"
import { isQuestion } from "./questions.js"
import type { SessionStore } from "./sessionStore.js"
import * as LivePump from "./livePump.js"
import * as Pacer from "./pacer.js"
import * as StoredSession from "./storedSession.js"

export type Ended = LivePump.Ended

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

const turnFailure = (error: SessionError.SessionSilent | SessionError.CliExited) =>
  error._tag === "SessionSilent"
    ? `the Claude Code CLI said nothing for ${Math.round(error.silentMillis / 1000)} s during a turn; it was stopped`
    : error.message

type Item = LivePump.Item

/** Permission asks go to the broker, `AskUserQuestion` to the client as a question; their answers back through the inbox. */
const permissionsOf = (options: Options, inject: (input: EventTranslator.Input) => Effect.Effect<void>) => {
  const viaBroker = PermissionBroker.permissionsFor(options.broker, options.cliSessionId, (request, resolution) =>
    // The translator emits `permission.replied` for an ask it knows of.
    inject({ _tag: "PermissionAnswered", requestId: request.requestId, reply: resolution.reply }))
  // `AskUserQuestion` arrives as a permission ask too; it is a question for the client.
  return Permissions.make((request) =>
    isQuestion(request)
      ? options.questions.ask(options.cliSessionId, request, (answer) =>
        inject(
          answer._tag === "Answered"
            ? { _tag: "QuestionAnswered", requestId: request.requestId, answers: answer.answers }
            : { _tag: "QuestionRejected", requestId: request.requestId }
        ))
      : viaBroker.canUseTool(request), { timeout: viaBroker.timeout ?? Permissions.defaultTimeout })
}

/** The session's events into the inbox, whole chunks: one offer per read of the subscription, not one per event. */
const forwardEvents = (session: Session.Session, inbox: Queue.Queue<Item>) =>
  Effect.flatMap(session.subscribe, (subscription) =>
    Stream.fromQueue(subscription).pipe(
      Stream.runForEachChunk((events) => {
        const receivedAt = Date.now()
        return Queue.offerAll(inbox, Chunk.map(events, (event): Item => ({ _tag: "Event", event: { _tag: "Cli", event, receivedAt } })))
      }),
      Effect.forkScoped
    ))

/** A turn the CLI never finished (silent past the watchdog's bound and killed, or exited): a `session.error` in its place. */
const reportFailedTurns = (session: Session.Session, inbox: Queue.Queue<Item>, sessionID: () => string) =>
  Effect.flatMap(session.turns, (turnQueue) =>
    Queue.take(turnQueue).pipe(
      Effect.flatMap((turn) => Effect.either(turn.result)),
      Effect.flatMap((result) =>
        Either.isRight(result) || result.left._tag === "SessionClosed" ? Effect.void : Queue.offer(inbox, {
          _tag: "Host",
          event: Canonical.event("session.error", {
            sessionID: sessionID(),
            error: { name: "UnknownError", data: { message: turnFailure(result.left) } }
          })
        })
      ),
      Effect.forever,
      Effect.forkScoped
    ))

/**
 * A write the log refused (a full disk): clients are told with a
 * `session.error` and an idle status, if the log takes those, and the
 * session stops. Its finalizer closes what is open.
 */
const logFailed = (options: Options, sessionID: string, error: EventLog.EventLogError) =>
  Effect.gen(function*() {
    yield* Effect.logError("LiveSession: the event log refused a write; stopping the session", error)
    yield* Effect.ignore(options.events.publish(options.directory, [
      Canonical.event("session.error", {
        sessionID,
        error: { name: "UnknownError", data: { message: `the server's event log refused a write (${error.message}); the session was stopped` } }
      })
    ]))
  })

/**
 * The most items a batch of the pump holds. A batch's frames go out only once
 * its records are in the log, so the batch bounds how long a client waits for
 * the next one. At 1,024 (2,048 records with the legacy copies, past the log's
 * follow buffer of 1,024, so the shared feed read half of each batch back from
 * the log's tail) `bench/serve`'s skein (process) frame gap p99 was 429–588 ms;
 * at 512 it was 178–278 ms, for the same server CPU per delta (31–36 µs).
 */
const maxBatch = 512

/**
 * While the CLI streams, the pump takes one batch per window at most: each
 * batch is one write to the log and one hand-out to every client, whatever
 * it holds, so a storm of single-line reads cost a batch per line. Text still
 * moves at this pace (about 60 frames a second). After a quiet window the
 * first item goes at once.
 */
const windowMillis = 16

/** The inbox's next batch: one item at least, and whatever else arrived within the window since the last one. */
const batches = (inbox: Queue.Queue<Item>) => {
  const pacer = Pacer.make(windowMillis)
  const taken = <A>(a: A) => {
    pacer.took()
    return a
  }
  return Effect.flatMap(Queue.takeBetween(inbox, 1, maxBatch), (first) =>
    first.length >= maxBatch
      ? Effect.succeed(taken(first))
      : pacer.wait.pipe(
        Effect.zipRight(Queue.takeUpTo(inbox, maxBatch - first.length)),
        Effect.map((rest) => taken(Chunk.appendAll(first, rest)))
      ))
}

/** Runs the pump over the inbox until the log refuses a write; then `pumpFailed` completes. */
const runPump = (options: Options, inbox: Queue.Queue<Item>, pump: LivePump.LivePump, pumpFailed: Deferred.Deferred<void>) =>
  batches(inbox).pipe(
    Effect.flatMap(pump.pumpBatch),
    Effect.forever,
    Effect.catchAll((error) =>
      logFailed(options, pump.translator().sessionID, error).pipe(Effect.zipRight(Deferred.succeed(pumpFailed, undefined)))
    ),
    Effect.forkScoped
  )

export const start = Effect.fn("LiveSession.start")(function*(options: Options) {
  const inbox = yield* Queue.unbounded<Item>()
  const inject = (input: EventTranslator.Input) => Effect.asVoid(Queue.offer(inbox, { _tag: "Input", input }))
  const permissions = permissionsOf(options, inject)
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
  yield* forwardEvents(session, inbox)
  const ended = yield* SubscriptionRef.make<Ended>({ count: 0, messages: [] })
  const busy = yield* SubscriptionRef.make(false)
  const pump = LivePump.make({
    directory: options.directory,
    cliSessionId: options.cliSessionId,
    initial: options.initial,
    events: options.events,
    broker: options.broker,
    questions: options.questions,
    stored,
    ended,
    busy
  })
  yield* reportFailedTurns(session, inbox, () => pump.translator().sessionID)
  const pumpFailed = yield* Deferred.make<void>()
  yield* runPump(options, inbox, pump, pumpFailed)
  // When the scope closes, whatever is open is closed as an interrupted turn closes it.
  yield* Effect.addFinalizer(() =>
    Effect.suspend(() => {
      const [, events] = EventTranslator.step(pump.translator(), { _tag: "End" })
      return Effect.ignore(options.events.publish(options.directory, events))
    })
  )
  const shown = Effect.sync(pump.shown)
  const done = Effect.raceFirst(Effect.asVoid(Effect.either(session.exit)), Deferred.await(pumpFailed))
  const model = yield* Ref.make<string | null | undefined>(undefined)
  return { session, ended, busy, inject, shown, done, model } satisfies LiveSession
})
