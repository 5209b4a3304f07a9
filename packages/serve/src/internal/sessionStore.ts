/**
 * What the registry keeps in the SQL session store, when one is in context
 * (`SqlStore`, from `--store`): the transcript mirror, the catalog of
 * sessions and the ledger of pending asks, over the one shared client.
 * Without a store there is none of it, and the registry keeps today's files.
 */
import { Ids } from "@skein/canonical"
import { Canonical } from "@skein/protocol"
import { AskLedger, SessionCatalog, SqlStore, TranscriptMirror } from "@skein/sql"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ServerEvents } from "../ServerEvents.js"

export interface SessionStore {
  readonly mirror: TranscriptMirror.TranscriptMirror["Type"]
  readonly catalog: SessionCatalog.SessionCatalog["Type"]
  readonly asks: AskLedger.AskLedger["Type"]
}

/** The store's parts, if a `SqlStore` is in context; `askHost` names this host in the ask ledger (default the machine's). */
export const fromContext = (askHost?: string): Effect.Effect<Option.Option<SessionStore>> =>
  Effect.flatMap(
    Effect.serviceOption(SqlStore.SqlStore),
    Option.match({
      onNone: () => Effect.succeedNone,
      onSome: (store) =>
        Effect.all({ mirror: TranscriptMirror.make, catalog: SessionCatalog.make, asks: AskLedger.make({ hostName: askHost }) }).pipe(
          Effect.provideService(SqlStore.SqlStore, store),
          Effect.map(Option.some)
        )
    })
  )

/** The session an ask belongs to: its announced `sessionID`, else the served id of its CLI session. */
const sessionOf = (ask: AskLedger.Ask) =>
  typeof ask.request === "object" && ask.request !== null && "sessionID" in ask.request && typeof ask.request.sessionID === "string"
    ? ask.request.sessionID
    : Ids.session(ask.cliSessionId)

/**
 * Asks an earlier incarnation of this host left open: their CLI died with
 * it, so no answer can reach it. Each is closed (`reject`, `host restarted`)
 * and its reply published, so no client waits on it forever.
 */
export const closeOrphans = (store: SessionStore, events: ServerEvents["Type"]) =>
  Effect.gen(function*() {
    const orphans = yield* store.asks.closeOrphans
    yield* Effect.forEach(orphans, (ask) => {
      const base = { sessionID: sessionOf(ask), requestID: ask.id, reply: "reject" as const, reason: AskLedger.hostRestarted }
      const event = ask.kind === "permission"
        ? Canonical.event("permission.replied", base)
        : Canonical.event("question.replied", { ...base, answers: [] })
      return events.publish(ask.directory, [event])
    }, { discard: true })
    return orphans.length
  })
