/**
 * A session that outlives its CLI process.
 *
 * Each incarnation is a `Session.start` run as a child of a kernel
 * Supervisor. When the CLI exits (a crash, a kill, OOM), the turn it was on
 * and its pending requests fail with `CliExited` as in any session; then,
 * with `restart` on, the supervisor starts the next incarnation with
 * `--resume <id>` of the last session id seen, so the next `send` continues
 * the same conversation.
 *
 * Restarts are bounded as an OTP supervisor bounds them: at most N within a
 * period T, so a CLI that dies now and then is restarted for as long as the
 * session lives, and one that dies in a loop is given up on. The backoff
 * starts over after a healthy run, so a crash a day never waits longer than
 * the first. Failures a retry cannot fix (`CliNotFound`, `SpawnFailed`,
 * `ResumeMismatch`) are not retried. Once the session stops, every call fails
 * with why: that error, the last `CliExited`, or `SessionClosed` after `end`
 * or a closed scope.
 *
 * `Session.ts` stays unaware of all this: this module only wraps it.
 */
import { type ProcessHost, Supervisor } from "@skein/kernel"
import type { Anthropic, Control, Json } from "@skein/protocol"
import {
  Cause,
  Data,
  Duration,
  Effect,
  Exit,
  Fiber,
  identity,
  Option,
  PubSub,
  Queue,
  Ref,
  Schema,
  type Scope,
  Stream,
  type Subscribable,
  SubscriptionRef
} from "effect"
import * as Session from "./Session.js"
import {
  CliExited,
  CliNotFound,
  type RequestError,
  ResumeMismatch,
  SessionClosed,
  SpawnFailed
} from "./SessionError.js"
import type { SessionEvent, Turn } from "./Turn.js"

export interface SupervisedOptions extends Session.SessionOptions {
  /**
   * Restart a CLI that exits mid-session, with `--resume <id>`. Off by
   * default. `true` allows 5 restarts within any 60 s, after a delay from
   * 200 ms doubling up to 5 s, and back to 200 ms after a healthy run (a
   * `result` on that CLI, or 60 s up). Options change any of these
   * (`maxRestarts`, `period`, `base`, `factor`, `maxDelay`, `resetAfter`).
   */
  readonly restart?: boolean | Supervisor.BackoffOptions | undefined
}

/** How one CLI process can fail: `Session.start`'s errors, or its exit. */
export type IncarnationError = CliExited | CliNotFound | SpawnFailed | ResumeMismatch

/** Why a supervised session stopped: what a retry cannot fix, the last crash, or a close. */
export type StopError = IncarnationError | SessionClosed

export type Status = Data.TaggedEnum<{
  /** A CLI is starting; `restarts` came before it. */
  Starting: { readonly restarts: number }
  Live: { readonly restarts: number; readonly session: Session.Session }
  /** The CLI of incarnation `restarts` failed with `cause`; the supervisor decides what follows. */
  Exited: { readonly restarts: number; readonly cause: IncarnationError }
  /** The CLI exited with `cause`; restart number `restarts` follows after `delay`. */
  Restarting: { readonly restarts: number; readonly delay: Duration.Duration; readonly cause: CliExited }
  /** For good. */
  Closed: { readonly cause: StopError }
}>
export const Status = Data.taggedEnum<Status>()

export interface SupervisedSession {
  /** The live incarnation; waits while a restart is under way, fails with why once stopped. */
  readonly current: Effect.Effect<Session.Session, StopError>
  /** Restarts so far: 0 while the first process runs. */
  readonly restarts: Subscribable.Subscribable<number>
  /** Where the session is: starting, live, restarting (after which delay, and why), or closed (and why). */
  readonly status: Subscribable.Subscribable<Status>
  /** The id of the conversation, as last reported by a CLI (`--resume` keeps it going). */
  readonly sessionId: Effect.Effect<string, StopError>
  /**
   * Every event of every incarnation, from the moment of subscription on
   * (each incarnation's from the end of its start).
   */
  readonly subscribe: Effect.Effect<Queue.Dequeue<SessionEvent>, never, Scope.Scope>
  /**
   * Queue a user message on the live incarnation. If that one has just died,
   * the message goes to the next; a turn already under way when the CLI died
   * fails with `CliExited` and is not replayed.
   */
  readonly send: (content: string | ReadonlyArray<Anthropic.ContentBlock>) => Effect.Effect<Turn, StopError>
  readonly request: (
    payload: Control.HostRequestPayload,
    options?: { readonly timeout?: Duration.DurationInput | undefined }
  ) => Effect.Effect<Json.JsonObject | undefined, RequestError | StopError>
  readonly interrupt: Effect.Effect<void, RequestError | StopError>
  /** Closes stdin of the live CLI: it finishes and exits, and is not restarted. */
  readonly end: Effect.Effect<void>
}

const childKey = "cli"

/** Failures that would come back on every retry: the same binary, arguments and transcript. */
const isFatal = Schema.is(Schema.Union(CliNotFound, SpawnFailed, ResumeMismatch))

/**
 * How long, after the CLI exited, the session may take to read the rest of
 * its stdout: a turn that ended just before the exit then counts, and its
 * events reach subscribers.
 */
const drainBound = Duration.seconds(5)

const restartOptions = (restart: Supervisor.BackoffOptions | true): Supervisor.BackoffOptions => {
  const given = restart === true ? {} : restart
  return {
    maxRestarts: given.maxRestarts ?? 5,
    period: given.period ?? Duration.seconds(60),
    base: given.base ?? Duration.millis(200),
    factor: given.factor ?? 2,
    maxDelay: given.maxDelay ?? Duration.seconds(5),
    resetAfter: given.resetAfter ?? Duration.seconds(60)
  }
}

const policyOf = (restart: SupervisedOptions["restart"]): Supervisor.RestartPolicy =>
  restart === undefined || restart === false
    ? Supervisor.never
    : Supervisor.escalateWhen(Supervisor.onFailure(restartOptions(restart)), isFatal)

/**
 * Where a status sits in the life of the session. Statuses come from the
 * incarnations and from the supervisor's events, in two fibers: only a later
 * one replaces the current one, so a late event never undoes a newer state.
 */
const rank = (status: Status): number =>
  Status.$match(status, {
    Starting: ({ restarts }) => 4 * restarts,
    Live: ({ restarts }) => 4 * restarts + 1,
    Exited: ({ restarts }) => 4 * restarts + 2,
    Restarting: ({ restarts }) => 4 * restarts - 1,
    Closed: () => Infinity
  })

/** What the incarnations and the supervised session share. */
interface Shared {
  readonly options: SupervisedOptions
  readonly status: SubscriptionRef.SubscriptionRef<Status>
  /** Moves the status on, never back: see `rank`. */
  readonly advance: (next: Status) => Effect.Effect<void>
  readonly restarts: SubscriptionRef.SubscriptionRef<number>
  readonly lastId: Ref.Ref<string | undefined>
  /** How the last incarnation failed, if it did: the cause callers see once the session stops. */
  readonly lastFailure: Ref.Ref<Option.Option<IncarnationError>>
  /** The host asked the CLI to finish (`end`): its exit is not a fault. */
  readonly ending: Ref.Ref<boolean>
  readonly events: PubSub.PubSub<SessionEvent>
}

/** One CLI process: runs until it exits, then fails so that the supervisor restarts it. */
const incarnation = (
  { advance, ending, events, lastFailure, lastId, options, restarts }: Shared
): Effect.Effect<void, IncarnationError, ProcessHost.ProcessHost | Scope.Scope | Supervisor.Incarnation> =>
  Effect.gen(function*() {
    const self = yield* Supervisor.Incarnation
    yield* SubscriptionRef.set(restarts, self.restarts)
    yield* advance(Status.Starting({ restarts: self.restarts }))
    // The first as given; later ones resume the last id.
    const id = yield* Ref.get(lastId)
    const session = yield* Session.start(
      id === undefined ? options : { ...options, resume: id, forkSession: undefined, continue: undefined }
    )
    // The id the CLI reported (`init`): only then is there a transcript to resume. A new
    // session's id is known at start, but a CLI that dies before its first turn wrote none.
    yield* session.state.changes.pipe(
      Stream.filterMap((s) => Option.fromNullable(s.sessionId)),
      Stream.runHead,
      Effect.flatMap((id) => Option.isSome(id) ? Ref.set(lastId, id.value) : Effect.void),
      Effect.forkScoped
    )
    const bus = yield* session.subscribe
    // A taken event is always published, so that interrupting the pump loses none.
    const pump = yield* Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(restore(Queue.take(bus)), (e) => PubSub.publish(events, e))
    ).pipe(Effect.forever, Effect.forkScoped)
    yield* advance(Status.Live({ restarts: self.restarts, session }))

    const exit = yield* session.exit
    const crash = new CliExited({ code: exit.code, signal: exit.signal, stderrTail: exit.stderrTail })
    const ended = yield* Ref.get(ending)
    // At once, before the drain: whoever awaited the same exit must not get this session from `current`.
    yield* advance(
      ended ? Status.Closed({ cause: new SessionClosed() }) : Status.Exited({ restarts: self.restarts, cause: crash })
    )
    yield* session.state.changes.pipe(
      Stream.filter((s) => s.status === "exited"),
      Stream.runHead,
      Effect.timeout(drainBound),
      Effect.ignore
    )
    yield* Fiber.interrupt(pump)
    yield* Effect.flatMap(Queue.takeAll(bus), (rest) => PubSub.publishAll(events, rest))
    const state = yield* session.state.get
    if (state.sessionId !== undefined) yield* Ref.set(lastId, state.sessionId)
    // A `result` proves this CLI works: its crash is no reason to wait longer before the next.
    if (state.counters.results > 0) yield* self.healthy
    if (!ended) return yield* crash
  }).pipe(
    Effect.onExit((exit) =>
      Effect.gen(function*() {
        const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
        yield* Ref.set(lastFailure, failure)
        if (Option.isSome(failure)) {
          const { restarts } = yield* Supervisor.Incarnation
          yield* advance(Status.Exited({ restarts, cause: failure.value }))
        }
      })
    )
  )

/**
 * Starts the first incarnation and supervises the next ones in the current
 * Scope. Permission, hook and elicitation services in context serve every
 * incarnation.
 */
export const start = Effect.fn("SupervisedSession.start")(function*(options: SupervisedOptions) {
  const status = yield* SubscriptionRef.make<Status>(Status.Starting({ restarts: 0 }))
  const shared: Shared = {
    options,
    status,
    advance: (next) => SubscriptionRef.update(status, (now) => rank(next) > rank(now) ? next : now),
    restarts: yield* SubscriptionRef.make(0),
    lastId: yield* Ref.make<string | undefined>(undefined),
    lastFailure: yield* Ref.make(Option.none<IncarnationError>()),
    ending: yield* Ref.make(false),
    events: yield* PubSub.unbounded<SessionEvent>()
  }
  const { advance, ending, events, lastFailure, lastId, restarts } = shared

  const supervisor = yield* Supervisor.make
  // Subscribed before the child starts: no event of it is missed.
  const lifecycle = yield* supervisor.subscribe
  /** The supervisor's side of the status: the delay of a restart, and the end. */
  const onLifecycle = (event: Supervisor.Event) =>
    Effect.gen(function*() {
      const failure = yield* Ref.get(lastFailure)
      if (event._tag === "ChildRestarting") {
        const cause = Option.filter(failure, (f): f is CliExited => f._tag === "CliExited")
        if (Option.isSome(cause)) {
          yield* advance(Status.Restarting({ restarts: event.restarts, delay: event.delay, cause: cause.value }))
        }
      } else if (event._tag === "ChildRemoved") {
        yield* advance(Status.Closed({ cause: Option.getOrElse(failure, (): StopError => new SessionClosed()) }))
      }
    })
  yield* Queue.take(lifecycle).pipe(Effect.flatMap(onLifecycle), Effect.forever, Effect.forkScoped)
  yield* supervisor.start(childKey, incarnation(shared), policyOf(options.restart)).pipe(
    Effect.catchTag("SupervisorClosed", () => advance(Status.Closed({ cause: new SessionClosed() })))
  )

  /**
   * What a status offers a caller who waits for a session other than `past`:
   * that session, why there is none, or nothing yet. A session whose CLI has
   * exited is not live, though its incarnation may not have ended: a caller
   * whose turn just failed with `CliExited` waits for the next one.
   */
  const offer = (
    past: Option.Option<Session.Session>,
    s: Status
  ): Effect.Effect<Option.Option<Exit.Exit<Session.Session, StopError>>> => {
    if (s._tag === "Closed") return Effect.succeed(Option.some(Exit.fail(s.cause)))
    if (s._tag !== "Live" || Option.contains(past, s.session)) return Effect.succeed(Option.none())
    return Effect.map(s.session.state.get, (state) =>
      state.status === "exited" ? Option.none() : Option.some(Exit.succeed(s.session)))
  }

  /** The first live incarnation other than `past`, or why the session stopped. */
  const settled = (past: Option.Option<Session.Session>): Effect.Effect<Session.Session, StopError> =>
    status.changes.pipe(
      Stream.mapEffect((s) => offer(past, s)),
      Stream.filterMap(identity),
      Stream.runHead,
      Effect.flatMap(Option.getOrElse((): Exit.Exit<Session.Session, StopError> => Exit.fail(new SessionClosed())))
    )

  const current = settled(Option.none())

  /** `f` on the live incarnation; if that one fails it (it just died), on the next, until the session stops. */
  const onLive = <A, E>(f: (session: Session.Session) => Effect.Effect<A, E>): Effect.Effect<A, StopError> => {
    const attempt = (session: Session.Session): Effect.Effect<A, StopError> =>
      Effect.catchAll(f(session), () => Effect.flatMap(settled(Option.some(session)), attempt))
    return Effect.flatMap(current, attempt)
  }

  // Runs first on close: whoever waits learns at once that the session is gone.
  yield* Effect.addFinalizer(() => advance(Status.Closed({ cause: new SessionClosed() })))

  const supervised: SupervisedSession = {
    current,
    restarts,
    status,
    sessionId: Effect.flatMap(Ref.get(lastId), (id) => id !== undefined ? Effect.succeed(id) : onLive((s) => s.sessionId)),
    subscribe: PubSub.subscribe(events),
    send: (content) => onLive((s) => s.send(content)).pipe(Effect.withSpan("SupervisedSession.send")),
    request: (payload, opts) => Effect.flatMap(current, (s) => s.request(payload, opts)),
    interrupt: Effect.flatMap(current, (s) => s.interrupt),
    end: Ref.set(ending, true).pipe(
      Effect.zipRight(current),
      Effect.flatMap((s) => s.end),
      Effect.ignore
    )
  }
  return supervised
})
