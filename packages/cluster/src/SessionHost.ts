/**
 * The `Session` entity's behaviour on the runner that holds its shard: each
 * RPC is the runner's in-process registry's operation, plus what lets the
 * session move: the transcript restored from SQL when the entity starts
 * here (the runner's registry mirrors it back before each turn's end), the
 * catalog kept current, and a turn recorded before its prompt reaches the CLI.
 *
 * @since 0.1.0
 */
import * as Entity from "@effect/cluster/Entity"
import { Canonical } from "@skein/protocol"
import { PermissionBroker, ServeError, ServerEvents, type SessionRegistry } from "@skein/serve"
import { AskLedger, SessionCatalog, type SqlStoreError, TranscriptMirror } from "@skein/sql"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { RunnerLost } from "./ClusterError.js"
import * as Asks from "./internal/asks.js"
import { RunnerSessions } from "./RunnerSessions.js"
import { SessionEntity } from "./SessionEntity.js"
import { TurnLedger } from "./TurnLedger.js"

/**
 * @since 0.1.0
 */
export interface Options {
  /** An entity with no request for this long passivates, and its CLI stops. Default the registry's 10 minutes. */
  readonly idleTimeout?: Duration.DurationInput | undefined
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

const handlers = Effect.gen(function*() {
  const address = yield* Entity.CurrentAddress
  const sessionID: string = address.entityId
  const { configDir, registry, runner } = yield* RunnerSessions
  const ledger = yield* TurnLedger
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

  return SessionEntity.of({
    Prompt: ({ payload }) =>
      Effect.gen(function*() {
        const fresh = yield* Effect.mapError(ledger.start(sessionID, payload.messageID, runner), storeFailed(sessionID))
        // Its row closes with it: the turn is no longer anyone's.
        if (!fresh) return yield* Effect.ensuring(lost(payload.messageID), Effect.ignore(ledger.end(sessionID, payload.messageID)))
        return yield* registry.prompt(sessionID, payload.content, { messageID: payload.messageID, model: payload.model }).pipe(
          Effect.ensuring(Effect.zipRight(Effect.ignore(ledger.end(sessionID, payload.messageID)), settled))
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
  SessionEntity.toLayer(handlers, {
    // Requests run side by side: an abort must reach a running turn; the CLI orders the turns.
    concurrency: "unbounded",
    maxIdleTime: options.idleTimeout ?? "10 minutes"
  })
