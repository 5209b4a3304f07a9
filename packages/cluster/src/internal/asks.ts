/**
 * Asks as the ledger (`skein_asks`) holds them, seen from the cluster: which
 * session an ask belongs to (so which entity can answer it), and how an ask
 * whose CLI died is reported closed.
 */
import { Ids } from "@skein/canonical"
import { Canonical } from "@skein/protocol"
import type { AskLedger } from "@skein/sql"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"

/** The session an ask belongs to: its announced `sessionID`, else the served id of its CLI session. */
export const sessionOf = (ask: AskLedger.Ask): string =>
  typeof ask.request === "object" && ask.request !== null && "sessionID" in ask.request && typeof ask.request.sessionID === "string"
    ? ask.request.sessionID
    : Ids.session(ask.cliSessionId)

/** The reply clients see for an ask closed without an answer (its CLI died with its runner). */
export const closedEvent = (ask: AskLedger.Ask, reason: string) => {
  const base = { sessionID: sessionOf(ask), requestID: ask.id, reply: "reject" as const, reason }
  return ask.kind === "permission"
    ? Canonical.event("permission.replied", base)
    : Canonical.event("question.replied", { ...base, answers: [] })
}

const decodePermission = Schema.decodeUnknownOption(Canonical.PermissionRequest)
const decodeQuestion = Schema.decodeUnknownOption(Canonical.QuestionRequest)

/** The open permission asks among the ledger's rows, as announced. */
export const permissions = (asks: ReadonlyArray<AskLedger.Ask>) =>
  asks.flatMap((ask) =>
    ask.kind === "permission"
      ? Option.match(decodePermission(ask.request), { onNone: () => [], onSome: (request) => [{ directory: ask.directory, request }] })
      : []
  )

/** The open questions among the ledger's rows, as announced. */
export const questions = (asks: ReadonlyArray<AskLedger.Ask>) =>
  asks.flatMap((ask) => ask.kind === "question" ? Option.toArray(decodeQuestion(ask.request)) : [])
