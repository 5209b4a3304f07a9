/**
 * A session that outlives its CLI process.
 *
 * Each incarnation is a `Session.start` run as a child of a kernel
 * Supervisor. When the CLI exits (a crash, a kill, OOM), the turn it was on
 * and its pending requests fail with `CliExited` as in any session; then,
 * with `restart` on, the supervisor starts the next incarnation with
 * `--resume <id>` of the last session id seen, so the next `send` continues
 * the same conversation. Restarts back off and are bounded: when the policy
 * gives up, or with `restart` off, the session is closed and every call fails
 * with `SessionClosed`.
 *
 * `Session.ts` stays unaware of all this: this module only wraps it.
 */
import { Supervisor } from "@skein/kernel"
import type { Anthropic, Control, Json } from "@skein/protocol"
import {
  type Duration,
  Effect,
  Option,
  PubSub,
  Queue,
  Ref,
  type Scope,
  Stream,
  type Subscribable,
  SubscriptionRef
} from "effect"
import * as Session from "./Session.js"
import { CliExited, type RequestError, SessionClosed, type TurnError } from "./SessionError.js"
import type { SessionEvent, Turn } from "./Turn.js"

export interface SupervisedOptions extends Session.SessionOptions {
  /**
   * Restart a CLI that exits mid-session, with `--resume <id>`. Off by
   * default; `true` means up to 5 restarts with a backoff from 200 ms, or
   * pass the backoff (`maxRestarts`, `base`, `factor`, `maxDelay`, `resetAfter`).
   */
  readonly restart?: boolean | Supervisor.BackoffOptions | undefined
}

export interface SupervisedSession {
  /** The live incarnation; waits while a restart is under way. */
  readonly current: Effect.Effect<Session.Session, SessionClosed>
  /** Restarts so far: 0 while the first process runs. */
  readonly restarts: Subscribable.Subscribable<number>
  /** The id of the conversation, as last reported by a CLI (`--resume` keeps it going). */
  readonly sessionId: Effect.Effect<string, TurnError>
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
  readonly send: (content: string | ReadonlyArray<Anthropic.ContentBlock>) => Effect.Effect<Turn, SessionClosed>
  readonly request: (
    payload: Control.HostRequestPayload,
    options?: { readonly timeout?: Duration.DurationInput | undefined }
  ) => Effect.Effect<Json.JsonObject | undefined, RequestError>
  readonly interrupt: Effect.Effect<void, RequestError>
  /** Closes stdin of the live CLI: it finishes and exits, and is not restarted. */
  readonly end: Effect.Effect<void>
}

type Slot =
  | { readonly _tag: "Starting" }
  | { readonly _tag: "Live"; readonly session: Session.Session }
  | { readonly _tag: "Closed" }

const childKey = "cli"

const policyOf = (restart: SupervisedOptions["restart"]): Supervisor.RestartPolicy =>
  restart === undefined || restart === false
    ? Supervisor.never
    : Supervisor.onFailure(restart === true ? { maxRestarts: 5, base: "200 millis" } : restart)

/**
 * Starts the first incarnation and supervises the next ones in the current
 * Scope. Permission, hook and elicitation services in context serve every
 * incarnation.
 */
export const start = Effect.fn("SupervisedSession.start")(function*(options: SupervisedOptions) {
  const slot = yield* SubscriptionRef.make<Slot>({ _tag: "Starting" })
  const restarts = yield* SubscriptionRef.make(0)
  const lastId = yield* Ref.make<string | undefined>(undefined)
  const ending = yield* Ref.make(false)
  const events = yield* PubSub.unbounded<SessionEvent>()
  let incarnations = 0

  /** The options of the next incarnation: the first as given, later ones resume the last id. */
  const nextOptions = Effect.map(Ref.get(lastId), (id): Session.SessionOptions =>
    id === undefined ? options : { ...options, resume: id, forkSession: undefined, continue: undefined })

  // One CLI process: runs until it exits, then fails so that the supervisor restarts it.
  const incarnation = Effect.gen(function*() {
    if (incarnations++ > 0) yield* SubscriptionRef.set(restarts, incarnations - 1)
    const session = yield* Session.start(yield* nextOptions)
    yield* session.sessionId.pipe(Effect.flatMap((id) => Ref.set(lastId, id)), Effect.ignore, Effect.forkScoped)
    const bus = yield* session.subscribe
    yield* Queue.take(bus).pipe(Effect.flatMap((e) => PubSub.publish(events, e)), Effect.forever, Effect.forkScoped)
    yield* SubscriptionRef.set(slot, { _tag: "Live", session })
    const status = yield* session.exit.pipe(
      Effect.ensuring(SubscriptionRef.update(slot, (s): Slot => s._tag === "Closed" ? s : { _tag: "Starting" }))
    )
    // An exit the host asked for (`end`) is not a fault.
    if (yield* Ref.get(ending)) return
    return yield* new CliExited({ code: status.code, signal: status.signal, stderrTail: status.stderrTail })
  })

  const supervisor = yield* Supervisor.make
  // Closed for good once the child is gone from the supervisor: the policy ran out, or it ended.
  yield* supervisor.children.changes.pipe(
    Stream.dropWhile((children) => !children.has(childKey)),
    Stream.filter((children) => !children.has(childKey)),
    Stream.runHead,
    Effect.zipRight(SubscriptionRef.set(slot, { _tag: "Closed" })),
    Effect.forkScoped
  )
  yield* supervisor.start(childKey, incarnation, policyOf(options.restart)).pipe(
    Effect.catchTag("SupervisorClosed", () => SubscriptionRef.set(slot, { _tag: "Closed" }))
  )

  const settled = (past: Option.Option<Session.Session>) =>
    slot.changes.pipe(
      Stream.filter((s) =>
        s._tag === "Closed" || (s._tag === "Live" && Option.match(past, { onNone: () => true, onSome: (p) => p !== s.session }))
      ),
      Stream.runHead,
      Effect.flatMap(Option.match({
        onNone: () => Effect.fail(new SessionClosed()),
        onSome: (s) => s._tag === "Live" ? Effect.succeed(s.session) : Effect.fail(new SessionClosed())
      }))
    )

  const current = settled(Option.none())

  const send = (content: string | ReadonlyArray<Anthropic.ContentBlock>) =>
    Effect.gen(function*() {
      let session = yield* current
      // A session whose CLI just died refuses the message: hand it to the next incarnation.
      for (let attempt = 0; attempt < 3; attempt++) {
        const sent = yield* Effect.either(session.send(content))
        if (sent._tag === "Right") return sent.right
        session = yield* settled(Option.some(session))
      }
      return yield* new SessionClosed()
    }).pipe(Effect.withSpan("SupervisedSession.send"))

  const supervised: SupervisedSession = {
    current,
    restarts,
    sessionId: Ref.get(lastId).pipe(
      Effect.flatMap((id) => id !== undefined ? Effect.succeed(id) : Effect.flatMap(current, (s) => s.sessionId))
    ),
    subscribe: PubSub.subscribe(events),
    send,
    request: (payload, opts) => Effect.flatMap(current, (s) => s.request(payload, opts)),
    interrupt: Effect.flatMap(current, (s) => s.interrupt),
    end: Ref.set(ending, true).pipe(
      Effect.zipRight(current),
      Effect.flatMap((s) => s.end),
      Effect.catchTag("SessionClosed", () => Effect.void)
    )
  }
  return supervised
})
