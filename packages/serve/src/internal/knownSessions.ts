/**
 * The sessions a server knows: those it created, and those it finds as
 * transcripts (written by the CLI itself, or by an earlier run). Keyed by the
 * served id; a lookup that misses rescans the transcripts once.
 */
import * as Effect from "effect/Effect"
import { Ids } from "@skein/canonical"
import { SessionNotFound } from "../ServeError.js"

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
  readonly add: (sessionID: string, known: Known) => void
  /** Forgets a session; a later refresh finds it again only if its transcript is still listed. */
  readonly remove: (sessionID: string) => void
  /** Rescans the transcripts: new ones are added, known ones get their latest mtime. */
  readonly refresh: Effect.Effect<void>
  readonly lookup: (sessionID: string) => Effect.Effect<Known, SessionNotFound>
  /** After a refresh, every session (of `directory`, if given). */
  readonly list: (directory?: string) => Effect.Effect<ReadonlyArray<readonly [string, Known]>>
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

export const make = (index: Listing, defaultDirectory: string): KnownSessions => {
  const known = new Map<string, Known>()

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
      known.set(id, {
        cliSessionId: s.sessionId,
        directory: s.cwd ?? defaultDirectory,
        title: s.mark?.label ?? s.title ?? s.firstPrompt ?? "untitled",
        created: s.mtime.getTime(),
        updated: s.mtime.getTime(),
        ...(parent === undefined ? {} : { parentID: Ids.session(parent) })
      })
    }
  })

  return {
    add: (sessionID, k) => {
      known.set(sessionID, k)
    },
    remove: (sessionID) => {
      known.delete(sessionID)
    },
    refresh,
    lookup: (sessionID) =>
      Effect.gen(function*() {
        if (!known.has(sessionID)) yield* refresh
        const k = known.get(sessionID)
        if (k === undefined) return yield* new SessionNotFound({ sessionID })
        return k
      }),
    list: (directory) =>
      Effect.map(refresh, () => [...known.entries()].filter(([, k]) => directory === undefined || k.directory === directory))
  }
}
