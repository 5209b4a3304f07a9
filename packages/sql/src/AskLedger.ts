/**
 * Pending permission and question asks, as rows until answered. The CLI
 * that waits on an ask lives in this process; when the process dies, so
 * does the CLI, and its asks would hang every client that lists them. A
 * server that starts again closes the asks its earlier incarnation left
 * open (reply `reject`, reason `host restarted`) and reports them, so it
 * can tell its clients with `permission.replied` / `question.replied`.
 *
 * A host is a stable name (the machine, by default) and an incarnation
 * made at each start; only the same host's older incarnations are closed,
 * never another live host's.
 *
 * @since 0.0.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { randomBytes } from "node:crypto"
import * as Os from "node:os"
import { reasonOf, StoreFailed } from "./SqlStoreError.js"
import { SqlStore } from "./SqlStore.js"

/**
 * @since 0.0.0
 */
export type Kind = "permission" | "question"

/**
 * @since 0.0.0
 */
export interface Ask {
  /** The client-facing id (`per_…`, `que_…`). */
  readonly id: string
  readonly kind: Kind
  readonly cliSessionId: string
  /** The CLI's control request id. */
  readonly requestId: string
  readonly directory: string
  /** The announced request, as JSON. */
  readonly request: unknown
}

/**
 * @since 0.0.0
 */
export const hostRestarted = "host restarted"

/**
 * @since 0.0.0
 */
export class AskLedger extends Context.Tag("@skein/sql/AskLedger")<AskLedger, {
  /** `<host name>/<incarnation>`: who opens asks now. */
  readonly host: string
  readonly open: (ask: Ask) => Effect.Effect<void, StoreFailed>
  /** Closes an open ask with its reply; false when it is unknown or was closed already. */
  readonly close: (id: string, reply: string, reason?: string) => Effect.Effect<boolean, StoreFailed>
  /** Closes every open ask of one CLI session (it stopped, so none can be answered); how many. */
  readonly closeSession: (cliSessionId: string, reply: string, reason: string) => Effect.Effect<number, StoreFailed>
  /** Closes every open ask of one CLI session, as `closeSession`, and returns them (to tell clients). */
  readonly closeSessionAsks: (cliSessionId: string, reply: string, reason: string) => Effect.Effect<ReadonlyArray<Ask>, StoreFailed>
  readonly isOpen: (id: string) => Effect.Effect<boolean, StoreFailed>
  /** The open ask with this id, if any: which session (and so which host) can answer it. */
  readonly find: (id: string) => Effect.Effect<Ask | undefined, StoreFailed>
  /** Open asks (of `directory`, if given). */
  readonly pending: (directory?: string) => Effect.Effect<ReadonlyArray<Ask>, StoreFailed>
  /** Closes this host's asks from earlier incarnations with `reject` and `host restarted`; returns them. */
  readonly closeOrphans: Effect.Effect<ReadonlyArray<Ask>, StoreFailed>
}>() {}

/**
 * @since 0.0.0
 */
export interface Options {
  /** The host's stable name. Default: the machine's hostname. */
  readonly hostName?: string | undefined
}

const Rows = Schema.Array(Schema.Struct({
  id: Schema.String,
  kind: Schema.Literal("permission", "question"),
  cli_session_id: Schema.String,
  request_id: Schema.String,
  directory: Schema.String,
  request: Schema.parseJson()
}))

const toAsk = (row: typeof Rows.Type[number]): Ask => ({
  id: row.id,
  kind: row.kind,
  cliSessionId: row.cli_session_id,
  requestId: row.request_id,
  directory: row.directory,
  request: row.request
})

/**
 * @since 0.0.0
 */
export const make = (options: Options = {}) =>
  Effect.gen(function*() {
    const { sql } = yield* SqlStore
    const name = (options.hostName ?? Os.hostname()).replace(/\//g, "_")
    const host = `${name}/${randomBytes(6).toString("hex")}`
    const failed = (operation: string) => (cause: unknown) => new StoreFailed({ operation: `asks ${operation}`, reason: reasonOf(cause) })
    const select = (rows: Effect.Effect<ReadonlyArray<unknown>, unknown>) =>
      rows.pipe(Effect.flatMap(Schema.decodeUnknown(Rows)), Effect.map((all) => all.map(toAsk)))

    const close = (id: string, reply: string, reason?: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        sql`UPDATE skein_asks SET closed = ${now}, reply = ${reply}, reason = ${reason ?? null}
          WHERE id = ${id} AND closed IS NULL RETURNING id`).pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.mapError(failed("close"))
        )

    return AskLedger.of({
      host,
      open: (ask) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          sql`INSERT INTO skein_asks ${
            sql.insert({
              id: ask.id,
              kind: ask.kind,
              cli_session_id: ask.cliSessionId,
              request_id: ask.requestId,
              directory: ask.directory,
              request: JSON.stringify(ask.request ?? null),
              host,
              opened: now
            })
          }`).pipe(Effect.asVoid, Effect.mapError(failed("open"))),
      close,
      closeSession: (cliSessionId, reply, reason) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          sql`UPDATE skein_asks SET closed = ${now}, reply = ${reply}, reason = ${reason}
            WHERE cli_session_id = ${cliSessionId} AND closed IS NULL RETURNING id`).pipe(
            Effect.map((rows) => rows.length),
            Effect.mapError(failed("close session"))
          ),
      closeSessionAsks: (cliSessionId, reply, reason) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          select(sql`UPDATE skein_asks SET closed = ${now}, reply = ${reply}, reason = ${reason}
            WHERE cli_session_id = ${cliSessionId} AND closed IS NULL RETURNING *`)).pipe(Effect.mapError(failed("close session"))),
      find: (id) =>
        select(sql`SELECT * FROM skein_asks WHERE id = ${id} AND closed IS NULL`).pipe(
          Effect.map((all) => all[0]),
          Effect.mapError(failed("find"))
        ),
      isOpen: (id) =>
        sql`SELECT id FROM skein_asks WHERE id = ${id} AND closed IS NULL`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.mapError(failed("lookup"))
        ),
      pending: (directory) =>
        select(
          directory === undefined
            ? sql`SELECT * FROM skein_asks WHERE closed IS NULL ORDER BY opened, id`
            : sql`SELECT * FROM skein_asks WHERE closed IS NULL AND directory = ${directory} ORDER BY opened, id`
        ).pipe(Effect.mapError(failed("pending"))),
      closeOrphans: Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        return yield* select(
          sql`UPDATE skein_asks SET closed = ${now}, reply = 'reject', reason = ${hostRestarted}
            WHERE closed IS NULL AND host LIKE ${`${name}/%`} AND host <> ${host} RETURNING *`
        )
      }).pipe(Effect.mapError(failed("close orphans")))
    })
  })

/**
 * @since 0.0.0
 */
export const layer = (options?: Options): Layer.Layer<AskLedger, never, SqlStore> => Layer.effect(AskLedger, make(options))
