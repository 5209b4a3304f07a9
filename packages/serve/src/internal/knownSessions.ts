/**
 * The sessions a server knows: those it created, and those it finds as
 * transcripts (written by the CLI itself, or by an earlier run). Keyed by the
 * served id; a lookup that misses rescans the transcripts once.
 *
 * With a session store (`SessionCatalog` rows), every session the server
 * creates, renames, forks or removes is written there too, and a lookup or
 * a listing reads the rows: a server on a new config dir, or another
 * machine, knows every session without the transcripts on its disk.
 */
import * as Effect from "effect/Effect"
import { Ids } from "@skein/canonical"
import type { SessionCatalog, SqlStoreError } from "@skein/sql"
import { SessionFailed, SessionNotFound } from "../ServeError.js"

export interface Known {
  readonly cliSessionId: string
  readonly directory: string
  title: string
  readonly created: number
  updated: number
  /** The served id of the session this one was forked from. */
  readonly parentID?: string | undefined
}

export interface KnownSessions {
  readonly add: (sessionID: string, known: Known) => Effect.Effect<void, SessionFailed>
  /** Writes a known session's title and `updated` (changed in place) where it is kept. */
  readonly save: (sessionID: string, known: Known) => Effect.Effect<void, SessionFailed>
  /** Forgets a session; a later refresh finds it again only if its transcript is still listed. */
  readonly remove: (sessionID: string) => Effect.Effect<void, SessionFailed>
  /** Rescans the transcripts: new ones are added, known ones get their latest mtime. */
  readonly refresh: Effect.Effect<void>
  readonly lookup: (sessionID: string) => Effect.Effect<Known, SessionNotFound | SessionFailed>
  /** After a refresh, every session (of `directory`, if given). */
  readonly list: (directory?: string) => Effect.Effect<ReadonlyArray<readonly [string, Known]>, SessionFailed>
}

/** What the catalog needs of the store's SessionIndex. */
export interface Listing {
  readonly list: () => Effect.Effect<
    ReadonlyArray<{
      readonly sessionId: string
      readonly cwd?: string | undefined
      readonly title?: string | undefined
      readonly firstPrompt?: string | undefined
      readonly mtime: Date
      /** What skein recorded: a title set through the server (`label`), the parent of a fork. */
      readonly mark?: { readonly label?: string | undefined; readonly parentSessionId?: string | undefined } | undefined
    }>,
    unknown
  >
}

const toEntry = (sessionId: string, k: Known): SessionCatalog.Entry => ({
  sessionId,
  cliSessionId: k.cliSessionId,
  directory: k.directory,
  title: k.title,
  created: k.created,
  updated: k.updated,
  parentId: k.parentID
})

/** A catalog row as the registry knows its session. */
export const fromEntry = (e: SessionCatalog.Entry): Known => ({
  cliSessionId: e.cliSessionId,
  directory: e.directory,
  title: e.title,
  created: e.created,
  updated: e.updated,
  ...(e.parentId === undefined ? {} : { parentID: e.parentId })
})

export const make = (index: Listing, defaultDirectory: string, rows?: SessionCatalog.SessionCatalog["Type"]): KnownSessions => {
  const known = new Map<string, Known>()
  const stored = (sessionID: string) => <A>(effect: Effect.Effect<A, SqlStoreError.StoreFailed>) =>
    Effect.mapError(effect, (e) => new SessionFailed({ sessionID, reason: e.message }))

  const refresh = Effect.gen(function*() {
    const listed = yield* Effect.orElseSucceed(index.list(), () => [])
    for (const s of listed) {
      const id = Ids.session(s.sessionId)
      const existing = known.get(id)
      if (existing !== undefined) {
        existing.updated = Math.max(existing.updated, s.mtime.getTime())
        continue
      }
      const parent = s.mark?.parentSessionId
      const found: Known = {
        cliSessionId: s.sessionId,
        directory: s.cwd ?? defaultDirectory,
        title: s.mark?.label ?? s.title ?? s.firstPrompt ?? "untitled",
        created: s.mtime.getTime(),
        updated: s.mtime.getTime(),
        ...(parent === undefined ? {} : { parentID: Ids.session(parent) })
      }
      // A transcript found on this disk joins the rows, unless they know it already (they win).
      const row = rows === undefined ? undefined : yield* Effect.orElseSucceed(rows.get(id), () => undefined)
      if (rows !== undefined && row === undefined) yield* Effect.ignore(rows.put(toEntry(id, found)))
      known.set(id, row === undefined ? found : fromEntry(row))
    }
  })

  const lookup = (sessionID: string) =>
    Effect.gen(function*() {
      const cached = known.get(sessionID)
      if (cached !== undefined) return cached
      if (rows !== undefined) {
        const row = yield* stored(sessionID)(rows.get(sessionID))
        if (row !== undefined) {
          const k = fromEntry(row)
          known.set(sessionID, k)
          return k
        }
      }
      yield* refresh
      const k = known.get(sessionID)
      if (k === undefined) return yield* new SessionNotFound({ sessionID })
      return k
    })

  const list = (directory?: string) =>
    Effect.gen(function*() {
      yield* refresh
      if (rows !== undefined) {
        for (const row of yield* stored("")(rows.list(directory))) {
          const cached = known.get(row.sessionId)
          if (cached === undefined) known.set(row.sessionId, fromEntry(row))
          else if (row.updated > cached.updated) {
            // Another server (or an earlier run) moved it on.
            cached.title = row.title
            cached.updated = row.updated
          }
        }
      }
      return [...known.entries()].filter(([, k]) => directory === undefined || k.directory === directory)
    })

  return {
    add: (sessionID, k) =>
      Effect.zipRight(
        rows === undefined ? Effect.void : stored(sessionID)(rows.put(toEntry(sessionID, k))),
        Effect.sync(() => known.set(sessionID, k))
      ),
    save: (sessionID, k) =>
      rows === undefined ? Effect.void : stored(sessionID)(rows.touch(sessionID, { title: k.title, updated: k.updated })),
    remove: (sessionID) =>
      Effect.zipRight(
        rows === undefined ? Effect.void : stored(sessionID)(rows.remove(sessionID)),
        Effect.sync(() => known.delete(sessionID))
      ),
    refresh,
    lookup,
    list
  }
}
