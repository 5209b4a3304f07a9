/**
 * Permission asks and `AskUserQuestion` questions across runners. The CLI
 * that waits on an ask runs on its session's runner, and only that runner's
 * broker holds it; any runner's edge may take the client's answer. The ask
 * ledger (`skein_asks`, written before an ask is announced) says which
 * session an ask is of: an answer this runner cannot give goes to that
 * session's entity, which gives it on its runner. An id no ledger row holds
 * open is unknown, answered or closed: `PermissionNotFound` /
 * `QuestionNotFound`, as on one server.
 *
 * Pending asks are listed from the ledger, so every edge lists every
 * runner's.
 *
 * @since 0.1.0
 */
import type { Canonical } from "@skein/protocol"
import { PermissionBroker, type ServeError, type SessionRegistry } from "@skein/serve"
import { AskLedger } from "@skein/sql"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Asks from "./internal/asks.js"
import { RunnerSessions } from "./RunnerSessions.js"
import { SessionEntity } from "./SessionEntity.js"

type Answer = Parameters<SessionRegistry.SessionRegistry["Type"]["answer"]>[1]

/**
 * @since 0.1.0
 */
export class ClusterAsks extends Context.Tag("@skein/cluster/ClusterAsks")<ClusterAsks, {
  readonly reply: (requestID: string, resolution: PermissionBroker.Resolution) => Effect.Effect<void, ServeError.PermissionNotFound>
  readonly answer: (requestID: string, answer: Answer) => Effect.Effect<void, ServeError.QuestionNotFound>
  /** Every runner's pending permission asks: the ledger's, and this runner's own. */
  readonly permissions: (directory?: string) => Effect.Effect<ReadonlyArray<PermissionBroker.Pending>>
  /** Every runner's pending questions: the ledger's, and this runner's own. */
  readonly questions: (directory?: string) => Effect.Effect<ReadonlyArray<Canonical.QuestionRequest>>
}>() {}

/** A cluster that cannot deliver an answer is the server's failure, not the client's unknown id. */
const undelivered = (requestID: string) => (error: { readonly _tag: string }) =>
  new Error(`the answer to ${requestID} could not reach its session's runner: ${error._tag}`)

/**
 * @since 0.1.0
 */
export const make = Effect.gen(function*() {
  const broker = yield* PermissionBroker.PermissionBroker
  const { registry } = yield* RunnerSessions
  const ledger = yield* AskLedger.AskLedger
  const client = yield* SessionEntity.client

  /** Here first (the session may run on this runner); else the entity of the ask's session, if the ask is open. */
  const route = <E>(requestID: string, here: Effect.Effect<void, E>, there: (sessionID: string) => Effect.Effect<void, E>) =>
    Effect.catchAll(here, (notFound) =>
      ledger.find(requestID).pipe(
        Effect.catchAll((error) => Effect.as(Effect.logWarning(`looking up ask ${requestID}`, error), undefined)),
        Effect.flatMap((ask) => ask === undefined ? Effect.fail(notFound) : there(Asks.sessionOf(ask)))
      ))

  /** The ledger's open asks and this runner's own (one whose row the ledger refused is still listed here). */
  const listed = <A>(
    select: (asks: ReadonlyArray<AskLedger.Ask>) => ReadonlyArray<A>,
    idOf: (a: A) => string,
    local: Effect.Effect<ReadonlyArray<A>>,
    directory?: string
  ) =>
    Effect.zipWith(
      ledger.pending(directory).pipe(
        Effect.map(select),
        Effect.catchAll((error) => Effect.as(Effect.logWarning("listing asks from the ledger", error), []))
      ),
      local,
      (everywhere, here) => {
        const seen = new Set(everywhere.map(idOf))
        return [...everywhere, ...here.filter((a) => !seen.has(idOf(a)))]
      }
    )

  return ClusterAsks.of({
    reply: (requestID, resolution) =>
      route(requestID, broker.reply(requestID, resolution), (sessionID) =>
        client(sessionID).ReplyPermission({ requestID, reply: resolution.reply, message: resolution.message }).pipe(
          Effect.catchIf((e) => e._tag !== "PermissionNotFound", (e) => Effect.die(undelivered(requestID)(e)))
        ) as Effect.Effect<void, ServeError.PermissionNotFound>),
    answer: (requestID, answer) =>
      route(requestID, registry.answer(requestID, answer), (sessionID) =>
        client(sessionID).AnswerQuestion({ requestID, answer }).pipe(
          Effect.catchIf((e) => e._tag !== "QuestionNotFound", (e) => Effect.die(undelivered(requestID)(e)))
        ) as Effect.Effect<void, ServeError.QuestionNotFound>),
    permissions: (directory) => listed(Asks.permissions, (p) => p.request.id, broker.pending(directory), directory),
    questions: (directory) => listed(Asks.questions, (q) => q.id, registry.questions(directory), directory)
  })
})

/**
 * @since 0.1.0
 */
export const layer = Layer.effect(ClusterAsks, make)

/**
 * The `PermissionBroker` an edge's routes use: this runner's broker, whose
 * replies and listing span the cluster. The runner's CLIs keep the broker
 * itself (an entity answers with it).
 *
 * @since 0.1.0
 */
export const brokerLayer = Layer.effect(
  PermissionBroker.PermissionBroker,
  Effect.gen(function*() {
    const broker = yield* PermissionBroker.PermissionBroker
    const asks = yield* ClusterAsks
    return PermissionBroker.PermissionBroker.of({ ...broker, reply: asks.reply, pending: asks.permissions })
  })
)
