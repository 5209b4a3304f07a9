/**
 * The `Session` entity's behaviour on the runner that holds its shard: each
 * RPC is the runner's in-process registry's operation, plus what lets the
 * session move: the transcript restored from SQL when the entity starts
 * here (the runner's registry mirrors it back before each turn's end), the
 * catalog kept current, and a turn recorded before its prompt reaches the CLI.
 * A running turn whose shard moves to another runner is let finish (for up
 * to `turnDrain`) before the shard is released, so a runner joining does not
 * cut it.
 *
 * @since 0.1.0
 */
import * as Entity from "@effect/cluster/Entity"
import * as Sharding from "@effect/cluster/Sharding"
import type * as Rpc from "@effect/rpc/Rpc"
import { Canonical } from "@skein/protocol"
import { PermissionBroker, ServeError, ServerEvents, type SessionRegistry } from "@skein/serve"
import { AskLedger, SessionCatalog, type SqlStoreError, TranscriptMirror } from "@skein/sql"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { RunnerLost } from "./ClusterError.js"
import * as Asks from "./internal/asks.js"
import { RunnerSessions } from "./RunnerSessions.js"
import { type Prompt, SessionEntity } from "./SessionEntity.js"
import * as TurnLedger from "./TurnLedger.js"

/**
 * @since 0.1.0
 */
export interface Options {
  /** An entity with no request for this long passivates, and its CLI stops. Default the registry's 10 minutes. */
  readonly idleTimeout?: Duration.DurationInput | undefined
  /**
   * How long a running turn may go on once its shard moves to another runner
   * (one joined and shards rebalance): it ends here with its reply, and only
   * then is the shard released; past this it is cut, and the prompt, delivered
   * again on the new runner, ends `RunnerLost`. Default 1 minute.
   */
  readonly turnDrain?: Duration.DurationInput | undefined
}

const storeFailed = (sessionID: string) => (e: SqlStoreError.StoreFailed) =>
  new ServeError.SessionFailed({ sessionID, reason: e.message })

/** The RunnerLost end of a turn, as clients see any turn end: the error, then idle. */
const lostEvents = (sessionID: string, messageID: string) => [
  Canonical.event("session.error", {
    sessionID,
    error: { name: "RunnerLost", data: { message: new RunnerLost({ sessionID, messageID }).message } }
  }),
  Canonical.event("session.status", { sessionID, status: { type: "idle" } }),
  Canonical.event("session.idle", { sessionID })
]

/**
 * The session's asks still open when its entity starts here: the CLI that
 * waited on them died with its runner (a runner that stops closes them), so
 * no answer can reach them. Each is closed (`reject`, `host restarted`) and
 * its reply published, so no client waits on it. Best effort.
 */
const closeOrphanAsks = Effect.fn("SessionHost.closeOrphanAsks")(function*(cliSessionId: string) {
  const asks = yield* AskLedger.AskLedger
  const events = yield* ServerEvents.ServerEvents
  const orphans = yield* asks.closeSessionAsks(cliSessionId, "reject", AskLedger.hostRestarted)
  yield* Effect.forEach(orphans, (ask) => events.publish(ask.directory, [Asks.closedEvent(ask, AskLedger.hostRestarted)]), { discard: true })
}, Effect.catchAll((error) => Effect.logWarning("closing the asks a dead runner left open", error)))

/** How the turn ended, for the ledger: an interruption only is a cut turn. */
const outcomeOf = (exit: Exit.Exit<unknown, unknown>): TurnLedger.Outcome =>
  Exit.isSuccess(exit) ? "answered" : Cause.isInterruptedOnly(exit.cause) ? "lost" : "failed"

const handlers = (options: Options) => Effect.gen(function*() {
  const address = yield* Entity.CurrentAddress
  const sharding = yield* Sharding.Sharding
  const turnDrain = Duration.decode(options.turnDrain ?? "1 minute")
  const sessionID: string = address.entityId
  const { configDir, registry, runner } = yield* RunnerSessions
  const ledger = yield* TurnLedger.TurnLedger
  const mirror = yield* TranscriptMirror.TranscriptMirror
  const catalog = yield* SessionCatalog.SessionCatalog
  const events = yield* ServerEvents.ServerEvents
  // This runner's own broker: it holds the asks of the CLIs that run here.
  const broker = yield* PermissionBroker.PermissionBroker

  // Another runner may have run this session: its transcript comes from SQL before the CLI resumes it here.
  const entry = yield* Effect.orElseSucceed(catalog.get(sessionID), () => undefined)
  if (entry !== undefined) {
    yield* mirror.restore(entry.cliSessionId, configDir).pipe(
      Effect.catchTag("TranscriptNotMirrored", () => Effect.void),
      Effect.catchAll((error) => Effect.logWarning(`restoring ${sessionID}'s transcript`, error)),
      Effect.asVoid
    )
  }
  if (entry !== undefined) yield* closeOrphanAsks(entry.cliSessionId)
  // Passivated, or its shard moved: the CLI stops with the entity.
  yield* Effect.addFinalizer(() => registry.stop(sessionID))

  /**
   * After a turn or a change: the catalog current. The transcript needs no
   * sync here: the runner's registry has the store in context and mirrors it
   * before a turn's end goes out. Best effort: the turn's answer stands.
   */
  const settle = (info: SessionRegistry.SessionInfo) =>
    catalog.touch(info.id, { title: info.title, updated: info.time.updated }).pipe(
      Effect.catchAll((error) => Effect.logWarning(`cataloguing ${info.id}`, error))
    )

  const settled = Effect.flatMap(Effect.option(registry.get(sessionID)), (info) => info._tag === "Some" ? settle(info.value) : Effect.void)

  const lost = (messageID: string) =>
    Effect.gen(function*() {
      const info = yield* registry.get(sessionID)
      yield* events.publish(info.directory, lostEvents(sessionID, messageID)).pipe(
        Effect.mapError((e) => new ServeError.SessionFailed({ sessionID, reason: `the event log refused RunnerLost: ${e.message}` }))
      )
      return yield* new RunnerLost({ sessionID, messageID })
    })

  /** The reply of a turn another runner answered: the assistant message answering `messageID`, as the transcript has it. */
  const answerOf = (messageID: string) =>
    Effect.flatMap(registry.messages(sessionID), (messages) => {
      const replies = messages.filter((m) => m.info.role === "assistant")
      const reply = replies.findLast((m) => m.info.role === "assistant" && m.info.parentID === messageID) ?? replies.at(-1)
      return reply === undefined ? new RunnerLost({ sessionID, messageID }) : Effect.succeed(reply)
    })

  /**
   * A prompt delivered again (at least once): its turn had started, here or
   * on a runner that has gone, and is never sent to the CLI twice. Answered
   * (its runner let it finish before its shard moved), the call gets the
   * reply; failed, its error went out already; else (cut, or its runner died
   * with it open) it ends `RunnerLost` now.
   */
  const redelivered = (messageID: string) =>
    Effect.gen(function*() {
      const outcome = yield* Effect.mapError(ledger.outcome(sessionID, messageID), storeFailed(sessionID))
      if (outcome === "answered") return yield* answerOf(messageID)
      if (outcome === "failed") return yield* new ServeError.SessionFailed({ sessionID, reason: `the turn of ${messageID} failed` })
      // Its row closes with it: the turn is no longer anyone's.
      return yield* Effect.ensuring(lost(messageID), Effect.ignore(ledger.end(sessionID, messageID, "lost")))
    })

  /**
   * The entity's interruption reached a running turn. Its shard moved (a
   * runner joined; not a shutdown, not the caller's interrupt): the turn goes
   * on for up to `turnDrain`, and the shard is released once it has ended.
   * Otherwise, or past that, the turn is cut.
   */
  const release = <A, E>(turn: Fiber.Fiber<A, E>) =>
    Effect.gen(function*() {
      const moving = !(yield* sharding.isShutdown) && !sharding.hasShardId(address.shardId)
      if (moving) {
        yield* Effect.logInfo(`${sessionID}'s shard moves: its running turn may finish first`)
        // `release` runs as a finalizer (uninterruptible): only an interruptible wait can time out.
        const ended = yield* Effect.timeout(Effect.interruptible(Fiber.await(turn)), turnDrain).pipe(Effect.option)
        if (Option.isSome(ended)) return
      }
      yield* Fiber.interrupt(turn)
    })

  /**
   * A turn not seen before: recorded, sent to the CLI, its outcome recorded.
   * It runs in a fiber of its own so that `release` decides whether the
   * entity's interruption cuts it.
   */
  const turn = (payload: Rpc.Payload<typeof Prompt>) =>
    registry.prompt(sessionID, payload.content, { messageID: payload.messageID, model: payload.model }).pipe(
      Effect.onExit((exit) => Effect.zipRight(Effect.ignore(ledger.end(sessionID, payload.messageID, outcomeOf(exit))), settled))
    )

  return SessionEntity.of({
    Prompt: ({ payload }) =>
      Effect.gen(function*() {
        const fresh = yield* Effect.mapError(ledger.start(sessionID, payload.messageID, runner), storeFailed(sessionID))
        if (!fresh) return yield* redelivered(payload.messageID)
        return yield* Effect.uninterruptibleMask((restore) =>
          // A daemon: a child fiber would be interrupted with the request, before `release` decides.
          Effect.flatMap(Effect.forkDaemon(restore(turn(payload))), (fiber) =>
            restore(Fiber.join(fiber)).pipe(Effect.onInterrupt(() => release(fiber))))
        )
      }).pipe(Effect.withSpan("SessionHost.prompt", { attributes: { sessionID } })),
    Abort: () => registry.abort(sessionID),
    Summarize: () => Effect.ensuring(registry.summarize(sessionID), settled),
    Fork: ({ payload }) =>
      Effect.gen(function*() {
        const fork = yield* registry.fork(sessionID, payload)
        yield* catalog.put({
          sessionId: fork.id,
          cliSessionId: fork.cliSessionId,
          directory: fork.directory,
          title: fork.title,
          created: fork.time.created,
          updated: fork.time.updated,
          parentId: sessionID
        }).pipe(Effect.mapError(storeFailed(sessionID)))
        yield* settle(fork)
        return fork
      }),
    Update: ({ payload }) => Effect.tap(registry.update(sessionID, payload), settle),
    Remove: () => Effect.zipRight(registry.remove(sessionID), Effect.mapError(catalog.remove(sessionID), storeFailed(sessionID))),
    Messages: () => registry.messages(sessionID),
    Stop: () => registry.stop(sessionID),
    ReplyPermission: ({ payload }) => broker.reply(payload.requestID, { reply: payload.reply, message: payload.message }),
    AnswerQuestion: ({ payload }) => registry.answer(payload.requestID, payload.answer)
  })
})

/**
 * Registers the entity on this runner.
 *
 * @since 0.1.0
 */
export const layer = (options: Options = {}) =>
  SessionEntity.toLayer(handlers(options), {
    // Requests run side by side: an abort must reach a running turn; the CLI orders the turns.
    concurrency: "unbounded",
    maxIdleTime: options.idleTimeout ?? "10 minutes"
  })
