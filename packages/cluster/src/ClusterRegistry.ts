/**
 * serve's `SessionRegistry` on the cluster: what a runner's HTTP edge uses.
 * Listing and lookup read the shared catalog (no runner's disk); every
 * operation on one session is a message to its entity, wherever its shard
 * is; `create` is a catalog row and its event, so a new session costs no
 * runner anything until its first prompt.
 *
 * Questions are listed and answered across runners (`ClusterAsks`). A
 * session is busy while a turn of it is open in the `TurnLedger`, on any
 * runner, or while this runner's registry says so (a summary); the running
 * CLIs are every runner's (each publishes its own, `RunningSessions`) and
 * those with an open turn anywhere.
 *
 * @since 0.1.0
 */
import { History, Ids, Todos } from "@skein/canonical"
import { Canonical } from "@skein/protocol"
import { ServeError, ServerEvents, SessionRegistry } from "@skein/serve"
import { SessionCatalog, type SqlStoreError } from "@skein/sql"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Crypto from "node:crypto"
import * as Path from "node:path"
import { ClusterAsks } from "./ClusterAsks.js"
import { RunningSessions } from "./internal/runningSessions.js"
import { RunnerSessions } from "./RunnerSessions.js"
import { SessionEntity } from "./SessionEntity.js"
import { TurnLedger } from "./TurnLedger.js"

/**
 * @since 0.1.0
 */
export interface Options {
  /** Folders sessions may run in (physical paths); a session elsewhere is neither listed nor found. */
  readonly roots?: ReadonlyArray<string> | undefined
}

type Content = Parameters<SessionRegistry.SessionRegistry["Type"]["prompt"]>[1]

const inside = (roots: ReadonlyArray<string> | undefined, directory: string) =>
  roots === undefined || roots.some((root) => directory === root || directory.startsWith(root.endsWith(Path.sep) ? root : root + Path.sep))

const infoOf = (e: SessionCatalog.Entry): SessionRegistry.SessionInfo => ({
  id: e.sessionId,
  slug: e.sessionId.slice(4),
  projectID: `prj_${Ids.hash(e.directory, 24)}`,
  directory: e.directory,
  title: e.title,
  version: "skein",
  cliSessionId: e.cliSessionId,
  ...(e.parentId === undefined ? {} : { parentID: e.parentId }),
  time: { created: e.created, updated: e.updated }
})

const canonicalInfo = (info: SessionRegistry.SessionInfo): Canonical.SessionInfo => ({
  id: info.id,
  title: info.title,
  directory: info.directory,
  projectID: info.projectID,
  ...(info.parentID === undefined ? {} : { parentID: info.parentID }),
  version: "skein",
  time: info.time
})

/** A lost turn, a store or cluster failure: all a `SessionFailed` to serve's routes. */
const asRegistryError = (sessionID: string) =>
<E extends { readonly _tag: string; readonly message: string }>(error: E): ServeError.RegistryError =>
  error instanceof ServeError.SessionNotFound || error instanceof ServeError.DirectoryRejected || error instanceof ServeError.SessionFailed
    ? error
    : new ServeError.SessionFailed({ sessionID, reason: `${error._tag}: ${error.message}` })

/**
 * @since 0.1.0
 */
export const make = Effect.fn("ClusterRegistry.make")(function*(options: Options = {}) {
  const catalog = yield* SessionCatalog.SessionCatalog
  const events = yield* ServerEvents.ServerEvents
  const { registry: local } = yield* RunnerSessions
  const client = yield* SessionEntity.client
  const asks = yield* ClusterAsks
  const turns = yield* TurnLedger
  const running = yield* RunningSessions

  /** Sessions with an open turn anywhere; none when the ledger fails (this runner's own still show). */
  const busy = Effect.catchAll(turns.busy, (error) => Effect.as(Effect.logWarning("reading the open turns", error), []))

  const storeFailed = (sessionID: string) => (e: SqlStoreError.StoreFailed) => new ServeError.SessionFailed({ sessionID, reason: e.message })

  /** The catalog's row; a transcript only this runner's disk has is adopted into the catalog. */
  const lookup = (sessionID: string) =>
    Effect.gen(function*() {
      const entry = yield* Effect.mapError(catalog.get(sessionID), storeFailed(sessionID))
      if (entry !== undefined) {
        if (!inside(options.roots, entry.directory)) return yield* new ServeError.SessionNotFound({ sessionID })
        return infoOf(entry)
      }
      const info = yield* local.get(sessionID)
      yield* Effect.mapError(catalog.put(entryOf(info)), storeFailed(sessionID))
      return info
    })

  const publish = (type: "session.created" | "session.updated" | "session.deleted", info: SessionRegistry.SessionInfo) =>
    events.publish(info.directory, [Canonical.event(type, { info: canonicalInfo(info) })]).pipe(
      Effect.mapError((e) => new ServeError.SessionFailed({ sessionID: info.id, reason: `the event log refused ${type}: ${e.message}` }))
    )

  /** An operation of the session's entity, after the session is known. */
  const call = <A, E extends { readonly _tag: string; readonly message: string }>(
    sessionID: string,
    op: (entity: ReturnType<typeof client>) => Effect.Effect<A, E>
  ) => Effect.zipRight(lookup(sessionID), Effect.mapError(op(client(sessionID)), asRegistryError(sessionID)))

  const messages = (sessionID: string) => call(sessionID, (entity) => entity.Messages())

  const promptPayload = (content: Content, options: SessionRegistry.PromptOptions | undefined) => ({
    messageID: options?.messageID ?? Ids.make("msg", Ids.sortKey(Date.now(), Ids.PROMPT_ORDINAL), Crypto.randomUUID()),
    content,
    ...(options?.model === undefined ? {} : { model: options.model })
  })

  return SessionRegistry.SessionRegistry.of({
    create: Effect.fn("ClusterRegistry.create")(function*(input) {
      const cliSessionId = Crypto.randomUUID()
      const now = Date.now()
      const entry: SessionCatalog.Entry = {
        sessionId: Ids.session(cliSessionId),
        cliSessionId,
        directory: input.directory,
        title: input.title ?? `New session - ${new Date(now).toISOString()}`,
        created: now,
        updated: now
      }
      yield* Effect.mapError(catalog.put(entry), storeFailed(entry.sessionId))
      const info = infoOf(entry)
      yield* publish("session.created", info)
      return info
    }),
    list: (directory) =>
      catalog.list(directory).pipe(
        Effect.map((all) => all.filter((e) => inside(options.roots, e.directory)).map(infoOf)),
        Effect.mapError(storeFailed(""))
      ),
    get: lookup,
    update: (sessionID, patch) => call(sessionID, (entity) => entity.Update(patch)),
    remove: (sessionID) =>
      Effect.gen(function*() {
        const info = yield* lookup(sessionID)
        yield* Effect.mapError(client(sessionID).Remove(), asRegistryError(sessionID))
        yield* Effect.mapError(catalog.remove(sessionID), storeFailed(sessionID))
        return info
      }).pipe(Effect.asVoid),
    children: (sessionID) =>
      Effect.zipRight(
        lookup(sessionID),
        Effect.mapError(catalog.list(), storeFailed(sessionID)).pipe(Effect.map((all) => all.filter((e) => e.parentId === sessionID).map(infoOf)))
      ),
    messages,
    message: (sessionID, messageID) =>
      Effect.flatMap(messages(sessionID), (all) => {
        const found = all.find((m) => m.info.id === messageID)
        return found === undefined ? new ServeError.MessageNotFound({ sessionID, messageID }) : Effect.succeed(found)
      }),
    todo: (sessionID) => Effect.map(messages(sessionID), Todos.todos),
    fork: (sessionID, input) =>
      Effect.flatMap(lookup(sessionID), () =>
        client(sessionID).Fork(input).pipe(
          Effect.catchTag("MessageNotFound", (e) => Effect.fail(e)),
          Effect.mapError((e) => e._tag === "MessageNotFound" ? e : asRegistryError(sessionID)(e))
        )),
    summarize: (sessionID) => call(sessionID, (entity) => entity.Summarize()),
    prompt: (sessionID, content, promptOptions) =>
      call(sessionID, (entity): Effect.Effect<History.WithParts, { readonly _tag: string; readonly message: string }> =>
        entity.Prompt(promptPayload(content, promptOptions))),
    promptAsync: (sessionID, content, promptOptions) => {
      const payload = promptPayload(content, promptOptions)
      // Persisted before this returns: the turn runs on the session's runner whatever becomes of this edge.
      return Effect.as(call(sessionID, (entity) => entity.Prompt(payload, { discard: true })), payload.messageID)
    },
    abort: (sessionID) => call(sessionID, (entity) => entity.Abort()),
    status: Effect.map(Effect.zip(local.status, busy), ([here, anywhere]) => {
      const out: Record<string, Canonical.SessionStatus> = { ...here }
      for (const id of anywhere) out[id] = { type: "busy" }
      return out
    }),
    running: Effect.map(Effect.zip(running.all, busy, { concurrent: true }), ([live, turning]) => [...new Set([...live, ...turning])]),
    stop: (sessionID) => Effect.ignore(client(sessionID).Stop()),
    questions: asks.questions,
    answer: asks.answer
  })
})

const entryOf = (info: SessionRegistry.SessionInfo): SessionCatalog.Entry => ({
  sessionId: info.id,
  cliSessionId: info.cliSessionId,
  directory: info.directory,
  title: info.title,
  created: info.time.created,
  updated: info.time.updated,
  ...(info.parentID === undefined ? {} : { parentId: info.parentID })
})

/**
 * @since 0.1.0
 */
export const layer = (options?: Options) => Layer.effect(SessionRegistry.SessionRegistry, make(options))
