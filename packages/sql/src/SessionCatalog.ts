/**
 * The sessions a server knows, as rows: a server on a new machine lists
 * every session from here without scanning any disk. Keyed by skein's `ses_`
 * id, with the CLI's session UUID beside it.
 *
 * @since 0.0.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { reasonOf, StoreFailed } from "./SqlStoreError.js"
import { SqlStore } from "./SqlStore.js"

/**
 * @since 0.0.0
 */
export interface Entry {
  readonly sessionId: string
  readonly cliSessionId: string
  readonly directory: string
  readonly title: string
  /** Epoch milliseconds. */
  readonly created: number
  readonly updated: number
  /** The `ses_` id this session was forked from. */
  readonly parentId?: string | undefined
}

/**
 * @since 0.0.0
 */
export class SessionCatalog extends Context.Tag("@skein/sql/SessionCatalog")<SessionCatalog, {
  /** Adds the session, or replaces its row. */
  readonly put: (entry: Entry) => Effect.Effect<void, StoreFailed>
  /** A new title and/or a later `updated`; nothing when the session is unknown. */
  readonly touch: (sessionId: string, change: { readonly title?: string | undefined; readonly updated?: number | undefined }) => Effect.Effect<void, StoreFailed>
  readonly remove: (sessionId: string) => Effect.Effect<void, StoreFailed>
  readonly get: (sessionId: string) => Effect.Effect<Entry | undefined, StoreFailed>
  /** Every session (of `directory`, if given), newest first. */
  readonly list: (directory?: string) => Effect.Effect<ReadonlyArray<Entry>, StoreFailed>
}>() {}

const Int = Schema.Union(Schema.Number, Schema.NumberFromString)
const Rows = Schema.Array(Schema.Struct({
  session_id: Schema.String,
  cli_session_id: Schema.String,
  directory: Schema.String,
  title: Schema.String,
  created: Int,
  updated: Int,
  parent_id: Schema.NullOr(Schema.String)
}))

const toEntry = (row: typeof Rows.Type[number]): Entry => ({
  sessionId: row.session_id,
  cliSessionId: row.cli_session_id,
  directory: row.directory,
  title: row.title,
  created: row.created,
  updated: row.updated,
  ...(row.parent_id === null ? {} : { parentId: row.parent_id })
})

/**
 * @since 0.0.0
 */
export const make = Effect.gen(function*() {
  const { sql } = yield* SqlStore
  const failed = (operation: string) => (cause: unknown) => new StoreFailed({ operation: `catalog ${operation}`, reason: reasonOf(cause) })
  const select = (rows: Effect.Effect<ReadonlyArray<unknown>, unknown>) =>
    rows.pipe(Effect.flatMap(Schema.decodeUnknown(Rows)), Effect.map((all) => all.map(toEntry)))

  return SessionCatalog.of({
    put: (entry) =>
      sql.withTransaction(Effect.zipRight(
        sql`DELETE FROM skein_sessions WHERE session_id = ${entry.sessionId}`,
        sql`INSERT INTO skein_sessions ${
          sql.insert({
            session_id: entry.sessionId,
            cli_session_id: entry.cliSessionId,
            directory: entry.directory,
            title: entry.title,
            created: entry.created,
            updated: entry.updated,
            parent_id: entry.parentId ?? null
          })
        }`
      )).pipe(Effect.asVoid, Effect.mapError(failed("put"))),
    // One statement (one round trip): a prompt's path waits on it.
    touch: (sessionId, change) => {
      const sets = [
        ...(change.title === undefined ? [] : [sql`title = ${change.title}`]),
        ...(change.updated === undefined ? [] : [sql`updated = CASE WHEN updated < ${change.updated} THEN ${change.updated} ELSE updated END`])
      ]
      return sets.length === 0
        ? Effect.void
        : sql`UPDATE skein_sessions SET ${sql.csv(sets)} WHERE session_id = ${sessionId}`.pipe(Effect.asVoid, Effect.mapError(failed("touch")))
    },
    remove: (sessionId) => sql`DELETE FROM skein_sessions WHERE session_id = ${sessionId}`.pipe(Effect.asVoid, Effect.mapError(failed("remove"))),
    get: (sessionId) =>
      select(sql`SELECT * FROM skein_sessions WHERE session_id = ${sessionId}`).pipe(
        Effect.map((all) => all[0]),
        Effect.mapError(failed("get"))
      ),
    list: (directory) =>
      select(
        directory === undefined
          ? sql`SELECT * FROM skein_sessions ORDER BY updated DESC, session_id`
          : sql`SELECT * FROM skein_sessions WHERE directory = ${directory} ORDER BY updated DESC, session_id`
      ).pipe(Effect.mapError(failed("list")))
  })
})

/**
 * @since 0.0.0
 */
export const layer: Layer.Layer<SessionCatalog, never, SqlStore> = Layer.effect(SessionCatalog, make)
