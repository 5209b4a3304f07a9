/**
 * A session whose CLI can be set aside while its transcript is rewritten.
 *
 * Compaction must not run beside a live CLI (it appends to the same file),
 * and the CLI reads its history only when it starts. So a pass ends the
 * CLI, writes, and starts it again with `--resume <same id>`. This module
 * owns that cycle for one conversation: each CLI process is a
 * `Session.start` in a child scope of the caller's; events of every process
 * reach the same subscribers, and `send` waits while a pass has the CLI
 * down. `suspend` is the one primitive `Compaction.run` needs (see `Host`);
 * a `SupervisedSession` that offered it would serve the same way.
 *
 * @since 0.0.0
 */
import type { ProcessHost } from "@skein/kernel"
import type { Anthropic } from "@skein/protocol"
import type { SessionError, SessionState, Turn } from "@skein/session"
import { Session, SessionState as State } from "@skein/session"
import type * as Compaction from "./Compaction.js"
import {
  Effect,
  ExecutionStrategy,
  Exit,
  Fiber,
  Option,
  PubSub,
  Queue,
  Ref,
  Scope,
  Stream,
  Subscribable,
  SubscriptionRef
} from "effect"

/**
 * What a pass sees of the stopped session.
 *
 * @since 0.0.0
 */
export interface Stopped {
  readonly sessionId: string
  readonly cwd: string
  readonly transcriptPath: string | undefined
  /** The state of the CLI that was ended, as it last was. */
  readonly state: SessionState.SessionState
}

/**
 * @since 0.0.0
 */
export interface CompactableSession {
  /** The live CLI session; waits while a pass has it down. */
  readonly current: Effect.Effect<Session.Session>
  /** Every event of every CLI process, from the moment of subscription on. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<Turn.SessionEvent>, never, Scope.Scope>
  /** Queues a user message on the live CLI, after any pass under way. */
  readonly send: (content: string | ReadonlyArray<Anthropic.ContentBlock>) => Effect.Effect<Turn.Turn, SessionError.TurnError>
  /** Compaction events, from the moment of subscription on. */
  readonly compactions: Effect.Effect<Queue.Dequeue<Compaction.Event>, never, Scope.Scope>
  /** Publishes a compaction event (`Compaction.run` does); it updates `state`'s `compaction`. */
  readonly publish: (event: Compaction.Event) => Effect.Effect<void>
  /**
   * Waits for the authoritative idle, ends the CLI (stdin closed, exit
   * awaited), runs `during`, then starts the CLI again with `--resume` of
   * the same id, whatever `during` did: failed, interrupted or done.
   */
  readonly suspend: Live["suspend"]
  /**
   * Runs `f` at the authoritative idle with the live CLI, holding off every
   * `send` and every other pass until it is done; `f` may `suspend` once
   * (e.g. a summarizing pass forks a worker from the live CLI first).
   */
  readonly exclusive: <A, E, R>(f: (live: Live) => Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** The options the CLI was started with (a worker forked from it must match them). */
  readonly options: Session.SessionOptions
  /**
   * The live CLI's state with `compaction` filled in: whether a pass holds
   * the session, how the last one ended, whether the breaker is open.
   * Follows each new CLI process; while a pass has the CLI down, only
   * compaction changes are emitted.
   */
  readonly state: Subscribable.Subscribable<SessionState.SessionState>
  /** Records whether automatic compaction is stopped (`AutoCompaction` does). */
  readonly setBreakerOpen: (open: boolean) => Effect.Effect<void>
}

/**
 * The live CLI inside `exclusive`.
 *
 * @since 0.0.0
 */
export interface Live {
  readonly session: Session.Session
  /** The CLI's session id; known before any turn when the CLI was resumed by id (`Session.knownSessionId`). */
  readonly sessionId: Effect.Effect<string, SessionError.TurnError>
  readonly suspend: <A, E, R>(
    during: (stopped: Stopped) => Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | SessionError.TurnError, R | ProcessHost.ProcessHost>
}

/** A CLI process and the scope that holds it. */
interface Incarnation {
  readonly session: Session.Session
  readonly scope: Scope.CloseableScope
  readonly pump: Fiber.RuntimeFiber<never>
  /** The id it was resumed with, when that is a plain resume by id. */
  readonly resumedAs: Option.Option<string>
  /** Whether a turn was sent to it through this session. */
  readonly sent: Ref.Ref<boolean>
}

/**
 * Quiet: the authoritative idle, or gone; or a CLI resumed by id that has
 * had no turn yet (it prints nothing, not even `init`, until its first
 * user message).
 */
const isQuiet = (incarnation: Incarnation, sent: boolean) => (state: SessionState.SessionState) =>
  state.status === "idle" || state.status === "exited" ||
  (state.status === "starting" && !sent && Option.isSome(incarnation.resumedAs))

/** The compaction state after an event of a pass. Pure. */
export const recordEvent = (state: SessionState.CompactionState, event: Compaction.Event): SessionState.CompactionState => {
  switch (event._tag) {
    case "Started":
      return { ...state, compacting: true }
    case "Finished":
      return {
        ...state,
        compacting: false,
        lastOutcome: event.outcome._tag === "Compacted" ? "compacted" : `declined: ${event.outcome.reason._tag}`
      }
    case "CliFinished":
      return { ...state, compacting: false, lastOutcome: event.turn.isError ? "failed" : "compacted" }
    case "Failed":
      return { ...state, compacting: false, lastOutcome: "failed" }
  }
}

/**
 * Starts the first CLI in the current scope.
 *
 * @since 0.0.0
 */
export const start = Effect.fn("CompactableSession.start")(function*(options: Session.SessionOptions) {
  const scope = yield* Effect.scope
  const events = yield* PubSub.unbounded<Turn.SessionEvent>()
  const live = yield* SubscriptionRef.make(Option.none<Incarnation>())
  const gate = yield* Effect.makeSemaphore(1)
  const compactions = yield* PubSub.unbounded<Compaction.Event>()
  const compaction = yield* SubscriptionRef.make(State.idleCompaction)
  /** The state of the CLI a pass ended, for as long as there is no live one. */
  const lastKnown = yield* Ref.make(Option.none<SessionState.SessionState>())

  const launch = (launchOptions: Session.SessionOptions) =>
    Effect.gen(function*() {
      const child = yield* Scope.fork(scope, ExecutionStrategy.sequential)
      const started = Effect.gen(function*() {
        const session = yield* Session.start(launchOptions)
        const bus = yield* session.subscribe
        const pump = yield* Effect.uninterruptibleMask((restore) =>
          Effect.flatMap(restore(Queue.take(bus)), (e) => PubSub.publish(events, e))
        ).pipe(Effect.forever, Effect.forkScoped)
        return { session, scope: child, pump, resumedAs: Session.knownSessionId(launchOptions), sent: yield* Ref.make(false) }
      })
      const incarnation = yield* Scope.extend(started, child).pipe(
        Effect.onError((cause) => Scope.close(child, Exit.failCause(cause)))
      )
      yield* SubscriptionRef.set(live, Option.some(incarnation))
      return incarnation
    })

  yield* launch(options)

  const currentIncarnation = live.changes.pipe(
    Stream.filterMap((i) => i),
    Stream.runHead,
    Effect.map(Option.getOrThrow)
  )
  const current = Effect.map(currentIncarnation, (i) => i.session)

  /** Ends the live CLI and waits for its exit; its last events still reach subscribers. */
  const stop = Effect.gen(function*() {
    const incarnation = Option.getOrThrow(yield* SubscriptionRef.get(live))
    const { session } = incarnation
    const sessionId = yield* incarnation.session.sessionId
    yield* session.end
    yield* session.exit
    yield* session.state.changes.pipe(Stream.filter((s) => s.status === "exited"), Stream.runHead, Effect.timeout("5 seconds"), Effect.ignore)
    const state = yield* session.state.get
    yield* Ref.set(lastKnown, Option.some(state))
    yield* SubscriptionRef.set(live, Option.none())
    yield* Scope.close(incarnation.scope, Exit.void)
    return { sessionId, cwd: state.cwd, transcriptPath: state.transcriptPath, state }
  })

  /** Ends the CLI, runs `during`, and starts the next CLI whatever `during` did. */
  const cycle: Live["suspend"] = (during) =>
    Effect.acquireUseRelease(
      stop,
      during,
      // A release runs uninterruptibly, and fibers inherit that: the next CLI's fibers
      // are started in a fiber of their own, interruptible, or its scope could never close.
      (stopped) =>
        launch({ ...options, resume: stopped.sessionId, forkSession: undefined, continue: undefined }).pipe(
          Effect.interruptible,
          Effect.forkIn(scope),
          Effect.flatMap(Fiber.join),
          Effect.orDie
        )
    )

  const exclusive: CompactableSession["exclusive"] = (f) =>
    gate.withPermits(1)(
      Effect.gen(function*() {
        const incarnation = yield* currentIncarnation
        const sent = yield* Ref.get(incarnation.sent)
        yield* incarnation.session.state.changes.pipe(Stream.filter(isQuiet(incarnation, sent)), Stream.runHead)
        return yield* f({ session: incarnation.session, sessionId: incarnation.session.sessionId, suspend: cycle })
      })
    )

  const withCompaction = (state: SessionState.SessionState, c: SessionState.CompactionState) => ({ ...state, compaction: c })
  const sessionStates = live.changes.pipe(
    Stream.flatMap(Option.match({
      onNone: () => Stream.fromIterableEffect(Effect.map(Ref.get(lastKnown), Option.toArray)),
      onSome: (i) => i.session.state.changes
    }), { switch: true })
  )
  const sessionState = Effect.flatMap(SubscriptionRef.get(live), (now) =>
    Option.isSome(now) ? now.value.session.state.get : Effect.flatMap(Ref.get(lastKnown), Option.match({
      onNone: () => Effect.flatMap(current, (s) => s.state.get),
      onSome: Effect.succeed
    })))
  const state = Subscribable.make({
    get: Effect.zipWith(sessionState, SubscriptionRef.get(compaction), withCompaction),
    changes: Stream.zipLatestWith(sessionStates, compaction.changes, withCompaction)
  })

  const compactable: CompactableSession = {
    current,
    subscribe: PubSub.subscribe(events),
    compactions: PubSub.subscribe(compactions),
    publish: (event) =>
      SubscriptionRef.update(compaction, (c) => recordEvent(c, event)).pipe(
        Effect.zipRight(PubSub.publish(compactions, event)),
        Effect.asVoid
      ),
    state,
    setBreakerOpen: (open) => SubscriptionRef.update(compaction, (c) => ({ ...c, breakerOpen: open })),
    send: (content) =>
      gate.withPermits(1)(
        Effect.flatMap(currentIncarnation, (i) => Effect.zipRight(Ref.set(i.sent, true), i.session.send(content)))
      ),
    options,
    exclusive,
    suspend: (during) => exclusive((live) => live.suspend(during))
  }
  return compactable
})
