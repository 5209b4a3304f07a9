/**
 * An actor: a bounded mailbox, private state and one fiber that handles the
 * messages in order. Sessions, tasks and workers are built on it.
 *
 * Two ways to run one:
 * - `make` forks the run loop into the caller's Scope. If the handler fails,
 *   the actor dies for good.
 * - `unstarted` hands back the run loop (`run`) so that a Supervisor can own
 *   it and restart it. The mailbox outlives a restart; the state is reset to
 *   `initial`.
 *
 * No ask is ever left pending: an ask fails with `ActorDied` when the actor
 * dies (the restarted incarnation skips the message), with `ActorStopped` when
 * the actor stops, and with `MailboxFull` when the overflow policy drops or
 * evicts its message. Between a death and a supervised restart, asks fail at
 * once with `ActorDied` while tells queue for the next incarnation.
 */
import type { Queue, Scope, Subscribable } from "effect"
import { Cause, Data, Deferred, Effect, Exit, FiberHandle, Mailbox, Option, PubSub, Stream, SubscriptionRef } from "effect"

/** The ask's actor stopped (scope closed or `stop`) before it replied. */
export class ActorStopped extends Data.TaggedError("ActorStopped")<{
  readonly actor: string
}> {}

/** The ask's actor died (its handler failed) before it replied. */
export class ActorDied extends Data.TaggedError("ActorDied")<{
  readonly actor: string
  readonly cause: Cause.Cause<unknown>
}> {}

/** The overflow policy dropped (`dropping`) or evicted (`sliding`) the ask's message. */
export class MailboxFull extends Data.TaggedError("MailboxFull")<{
  readonly actor: string
}> {}

/** Every way an ask can fail besides the handler's own reply error. */
export type AskError = ActorStopped | ActorDied | MailboxFull

/**
 * What the mailbox does when it is full:
 * - `suspend`: `tell`/`ask` wait for room (backpressure);
 * - `dropping`: the new message is refused (`tell` returns false, `ask` fails with `MailboxFull`);
 * - `sliding`: the oldest queued message is evicted to make room (its ask fails with `MailboxFull`).
 */
export type Overflow = "suspend" | "dropping" | "sliding"

export type Status = Data.TaggedEnum<{
  /** Created, run loop not started yet. Messages queue. */
  Idle: {}
  /** Handling messages. `incarnation` counts starts, 1 for the first. */
  Running: { readonly incarnation: number }
  /** The handler failed. A supervisor may restart it. */
  Died: { readonly cause: Cause.Cause<unknown> }
  /** Stopped for good; the mailbox is closed. */
  Stopped: {}
}>
export const Status = Data.taggedEnum<Status>()

export type LifecycleEvent = Data.TaggedEnum<{
  Started: { readonly actor: string }
  Restarted: { readonly actor: string; readonly incarnation: number }
  Died: { readonly actor: string; readonly cause: Cause.Cause<unknown> }
  Stopped: { readonly actor: string }
}>
export const LifecycleEvent = Data.taggedEnum<LifecycleEvent>()

/**
 * The reply side of an ask, carried inside the message. The handler completes
 * it, now or later (it may keep it in its state). A thin view of a Deferred
 * whose error side also carries `AskError`, which the handler never sees.
 */
export interface Reply<in A, in E = never> {
  readonly succeed: (value: A) => Effect.Effect<boolean>
  readonly fail: (error: E) => Effect.Effect<boolean>
  readonly complete: (effect: Effect.Effect<A, E>) => Effect.Effect<boolean>
}

export interface Actor<out S, in M> {
  readonly name: string
  /** Fire and forget; whether the mailbox accepted the message under its overflow policy. */
  readonly tell: (message: M) => Effect.Effect<boolean>
  /** Send `f(reply)` and wait for the handler to complete `reply`. */
  readonly ask: <A, E = never>(f: (reply: Reply<A, E>) => M) => Effect.Effect<A, E | AskError>
  readonly state: Subscribable.Subscribable<S>
  readonly status: Subscribable.Subscribable<Status>
  /** Lifecycle events from the moment of subscription on. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<LifecycleEvent>, never, Scope.Scope>
  /**
   * Closes the mailbox (later tells return false), fails every pending ask with
   * `ActorStopped`, and, for an actor started by `make`, interrupts its fiber
   * and returns after its finalizers ran. A supervised run loop sees the closed
   * mailbox and ends successfully; prefer `Supervisor.stop` for those.
   */
  readonly stop: Effect.Effect<void>
}

export interface Options<S, M, E, R> {
  readonly initial: S
  /** Handles one message; the result is the next state. A failure kills the actor. */
  readonly handle: (state: S, message: M) => Effect.Effect<S, E, R>
  /** Default 1024. */
  readonly capacity?: number | undefined
  /** Default `suspend`. */
  readonly overflow?: Overflow | undefined
  readonly name?: string | undefined
}

/** An actor whose run loop the caller owns (typically a Supervisor child). */
export interface Unstarted<S, M, R> {
  readonly actor: Actor<S, M>
  /**
   * One incarnation: resets the state, handles messages until the mailbox is
   * closed (success) or the handler fails (`ActorDied`). Runs one at a time:
   * a second concurrent run waits for the first to end.
   */
  readonly run: Effect.Effect<void, ActorDied, R>
}

interface Envelope<M> {
  seq: number
  readonly message: M
  /** For an ask: whether its reply is already complete. */
  readonly answered: Effect.Effect<boolean> | undefined
}

interface Built<S, M, R> extends Unstarted<S, M, R> {
  readonly handle: FiberHandle.FiberHandle<void, ActorDied>
  readonly close: Effect.Effect<void>
}

let anonymous = 0

const makeReply = <A, E>(deferred: Deferred.Deferred<A, E | AskError>): Reply<A, E> => ({
  succeed: (value) => Deferred.succeed(deferred, value),
  fail: (error) => Deferred.fail(deferred, error),
  complete: (effect) => Deferred.complete(deferred, effect)
})

const build = <S, M, E, R>(
  options: Options<S, M, E, R>
): Effect.Effect<Built<S, M, R>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const name = options.name ?? `actor-${++anonymous}`
    const capacity = options.capacity ?? 1024
    const overflow = options.overflow ?? "suspend"
    if (!Number.isInteger(capacity) || capacity < 1) {
      return yield* Effect.dieMessage(`Actor ${name}: capacity must be a positive integer, got ${capacity}`)
    }
    const mailbox = yield* Mailbox.make<Envelope<M>>({ capacity, strategy: overflow })
    const stateRef = yield* SubscriptionRef.make(options.initial)
    const statusRef = yield* SubscriptionRef.make<Status>(Status.Idle())
    const events = yield* PubSub.unbounded<LifecycleEvent>()
    const runLock = yield* Effect.makeSemaphore(1)

    // The status as the synchronous paths (ask registration, eviction) see it;
    // the SubscriptionRef mirrors it for observers.
    let phase: Status = Status.Idle()
    let closed = false
    let incarnation = 0
    let nextSeq = 0
    // Asks that have not returned yet, by the seq of their envelope.
    const pending = new Map<number, (error: AskError) => void>()

    const askFailure = (): AskError | undefined =>
      phase._tag === "Died"
        ? new ActorDied({ actor: name, cause: phase.cause })
        : phase._tag === "Stopped"
        ? new ActorStopped({ actor: name })
        : undefined

    const failPending = (error: AskError) => {
      for (const fail of pending.values()) fail(error)
    }

    const setPhase = (status: Status) =>
      Effect.suspend(() => {
        phase = status
        return SubscriptionRef.set(statusRef, status)
      })

    // Sliding: seqs are assigned and offered in one synchronous step and the
    // mailbox is FIFO, so it always holds the envelopes [seq - size, seq) and a
    // full mailbox evicts exactly `seq - size`.
    const offerSliding = (envelope: Envelope<M>): boolean => {
      const size = mailbox.unsafeSize()
      if (Option.isSome(size) && size.value >= capacity) {
        pending.get(envelope.seq - size.value)?.(new MailboxFull({ actor: name }))
      }
      return mailbox.unsafeOffer(envelope)
    }

    // Must be called in the same synchronous step that assigned `envelope.seq`.
    const offer = (envelope: Envelope<M>): Effect.Effect<boolean> =>
      overflow === "sliding" ? Effect.succeed(offerSliding(envelope)) : mailbox.offer(envelope)

    const tell = (message: M): Effect.Effect<boolean> =>
      Effect.suspend(() => offer({ seq: nextSeq++, message, answered: undefined }))

    const ask = <A, E2 = never>(f: (reply: Reply<A, E2>) => M): Effect.Effect<A, E2 | AskError> =>
      Effect.flatMap(Deferred.make<A, E2 | AskError>(), (deferred) => {
        const envelope: Envelope<M> = { seq: -1, message: f(makeReply(deferred)), answered: Deferred.isDone(deferred) }
        return Effect.suspend(() => {
          envelope.seq = nextSeq++
          // Registered before the status check, so a death or stop from here on fails it.
          pending.set(envelope.seq, (error) => Deferred.unsafeDone(deferred, Exit.fail(error)))
          const failure = askFailure()
          if (failure !== undefined) return Effect.fail(failure)
          return Effect.flatMap(offer(envelope), (accepted) =>
            accepted
              ? Deferred.await(deferred)
              : Effect.fail(askFailure() ?? new MailboxFull({ actor: name })))
        }).pipe(Effect.ensuring(Effect.sync(() => pending.delete(envelope.seq))))
      }).pipe(Effect.withSpan("Actor.ask", { attributes: { actor: name } }))

    const run: Effect.Effect<void, ActorDied, R> = runLock.withPermits(1)(
      Effect.gen(function*() {
        if (closed) return
        incarnation += 1
        let state = options.initial
        yield* SubscriptionRef.set(stateRef, state)
        yield* setPhase(Status.Running({ incarnation }))
        yield* PubSub.publish(
          events,
          incarnation === 1
            ? LifecycleEvent.Started({ actor: name })
            : LifecycleEvent.Restarted({ actor: name, incarnation })
        )
        while (true) {
          const next = yield* Effect.option(mailbox.take)
          if (Option.isNone(next)) return
          const envelope = next.value
          // An ask already answered (failed by an earlier death) is not handled.
          if (envelope.answered !== undefined && (yield* envelope.answered)) continue
          const exit = yield* Effect.exit(options.handle(state, envelope.message))
          if (Exit.isSuccess(exit)) {
            state = exit.value
            yield* SubscriptionRef.set(stateRef, state)
            continue
          }
          if (Cause.isInterruptedOnly(exit.cause)) return yield* Effect.interrupt
          const died = new ActorDied({ actor: name, cause: exit.cause })
          yield* setPhase(Status.Died({ cause: exit.cause }))
          failPending(died)
          yield* PubSub.publish(events, LifecycleEvent.Died({ actor: name, cause: exit.cause }))
          return yield* Effect.fail(died)
        }
      })
    ).pipe(Effect.withSpan("Actor.run", { attributes: { actor: name } }))

    // Closes the mailbox for good and fails what is pending. A dead actor keeps
    // its Died status, so later asks still say why. Idempotent.
    const close = Effect.suspend(() => {
      if (closed) return Effect.void
      closed = true
      const cause = phase._tag === "Died" ? phase.cause : undefined
      return Effect.gen(function*() {
        // Stopped before the shutdown, so an ask racing it fails with ActorStopped.
        if (cause === undefined) yield* setPhase(Status.Stopped())
        yield* mailbox.shutdown
        failPending(cause === undefined ? new ActorStopped({ actor: name }) : new ActorDied({ actor: name, cause }))
        if (cause === undefined) yield* PubSub.publish(events, LifecycleEvent.Stopped({ actor: name }))
      })
    })
    yield* Effect.addFinalizer(() => close)

    // Holds the fiber `make` starts; created after the finalizer above, so on
    // scope close the fiber is interrupted (and awaited) before the mailbox closes.
    const handle = yield* FiberHandle.make<void, ActorDied>()

    const actor: Actor<S, M> = {
      name,
      tell,
      ask,
      state: stateRef,
      status: statusRef,
      subscribe: PubSub.subscribe(events),
      stop: Effect.zipRight(FiberHandle.clear(handle), close).pipe(
        Effect.withSpan("Actor.stop", { attributes: { actor: name } })
      )
    }
    return { actor, run, handle, close }
  })

/**
 * Builds the actor in the current Scope without starting it; run `run` (for
 * instance as a Supervisor child) to start it. Closing the Scope stops it: the
 * mailbox closes and every pending ask fails with `ActorStopped`.
 */
export const unstarted = <S, M, E = never, R = never>(
  options: Options<S, M, E, R>
): Effect.Effect<Unstarted<S, M, R>, never, Scope.Scope> =>
  Effect.map(build(options), ({ actor, run }) => ({ actor, run }))

/**
 * Builds and starts an actor. Its fiber lives in the caller's Scope: closing
 * the Scope interrupts it and stops the actor. A handler failure kills the
 * actor for good (status `Died`, `Died` event, pending asks fail with `ActorDied`).
 */
export const make = <S, M, E = never, R = never>(
  options: Options<S, M, E, R>
): Effect.Effect<Actor<S, M>, never, Scope.Scope | R> =>
  Effect.gen(function*() {
    const { actor, close, handle, run } = yield* build(options)
    // Once dead, nothing restarts it: close the mailbox so tells are refused
    // and asks fail at once with ActorDied.
    yield* FiberHandle.run(handle, Effect.onExit(run, (exit) => Exit.isFailure(exit) ? close : Effect.void))
    // Returns a running actor: the Started event is out before anyone can subscribe.
    yield* actor.status.changes.pipe(Stream.filter((status) => status._tag !== "Idle"), Stream.runHead)
    return actor
  })
