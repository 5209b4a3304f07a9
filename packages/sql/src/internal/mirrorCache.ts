/**
 * What this process last mirrored of each file (`<cli session>/<path>`): its
 * length and last row, so that a sync at a turn's end costs one round trip
 * (the write), not three. A session whose sync failed is forgotten: its next
 * sync reads the database again and catches up from there.
 */
import * as Effect from "effect/Effect"
import type { Row } from "./mirrorRows.js"

/** A file's mirrored length, and its last row when this process knows it. */
export interface Mirrored {
  readonly size: number
  readonly last: Row | undefined
}

export interface MirrorCache {
  readonly get: (cliSessionId: string, path: string) => Mirrored | undefined
  readonly has: (cliSessionId: string, path: string) => boolean
  readonly set: (cliSessionId: string, path: string, mirrored: Mirrored) => void
  readonly forget: (cliSessionId: string) => Effect.Effect<void>
}

export const make = (): MirrorCache => {
  const synced = new Map<string, Mirrored>()
  const keyOf = (cliSessionId: string, path: string) => `${cliSessionId}/${path}`
  return {
    get: (cliSessionId, path) => synced.get(keyOf(cliSessionId, path)),
    has: (cliSessionId, path) => synced.has(keyOf(cliSessionId, path)),
    set: (cliSessionId, path, mirrored) => {
      synced.set(keyOf(cliSessionId, path), mirrored)
    },
    forget: (cliSessionId) =>
      Effect.sync(() => {
        for (const key of synced.keys()) if (key.startsWith(`${cliSessionId}/`)) synced.delete(key)
      })
  }
}
