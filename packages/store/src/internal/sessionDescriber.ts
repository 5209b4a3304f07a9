/**
 * What a transcript holds for a listing, remembered by path: an unchanged
 * file (same size and mtime) costs one `stat`; a file that only grew is
 * counted from where the last count stopped, its head kept.
 */
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Option, Ref } from "effect"
import type { SessionInfo } from "../SessionIndex.js"
import * as TranscriptStore from "../TranscriptStore.js"
import { type Head, headScan } from "./headScan.js"
import { countMessages } from "./messageCount.js"
import { SessionIndexError } from "./sessionIndexError.js"

/** A listed session before liveness and marks are known. */
export type Described = Omit<SessionInfo, "live" | "ownerPid" | "mark" | "isWorker">

interface Cached {
  readonly size: number
  readonly mtimeMs: number
  readonly counted: { readonly count: number; readonly offset: number }
  readonly head: Head
  readonly info: Described
}

export type Describe = (
  projectDir: string,
  sessionId: string,
  path: string
) => Effect.Effect<Described, PlatformError | SessionIndexError>

const titleSourceOf = (tail: TranscriptStore.TailMetadata, head: Head): Described["titleSource"] =>
  tail.customTitle !== undefined
    ? "custom-title"
    : tail.aiTitle !== undefined
    ? "ai-title"
    : head.firstPrompt !== undefined
    ? "first-prompt"
    : undefined

export const make = (fs: FileSystem.FileSystem): Effect.Effect<Describe> =>
  Effect.map(Ref.make(new Map<string, Cached>()), (cache): Describe => (projectDir, sessionId, path) =>
    Effect.gen(function*() {
      const stat = yield* fs.stat(path)
      const size = Number(stat.size)
      const mtime = Option.getOrElse(stat.mtime, () => new Date(0))
      const known = (yield* Ref.get(cache)).get(path)
      if (known !== undefined && known.size === size && known.mtimeMs === mtime.getTime()) return known.info
      const grew = known !== undefined && size >= known.counted.offset && known.head.firstPrompt !== undefined
      const more = yield* countMessages(fs, path, grew ? known.counted.offset : 0)
      const counted = grew ? { count: known.counted.count + more.count, offset: more.offset } : more
      const head = grew ? known.head : yield* headScan(fs, path)
      const tail = yield* TranscriptStore.tailScan(path).pipe(
        Effect.provideService(FileSystem.FileSystem, fs),
        Effect.catchAll((error) => Effect.fail(new SessionIndexError({ path, message: error._tag })))
      )
      const info: Described = {
        sessionId,
        path,
        projectDir,
        title: tail.customTitle ?? tail.aiTitle ?? head.firstPrompt,
        titleSource: titleSourceOf(tail, head),
        customTitle: tail.customTitle,
        aiTitle: tail.aiTitle,
        firstPrompt: head.firstPrompt,
        lastPrompt: tail.lastPrompt,
        tag: tail.tag,
        cwd: head.cwd,
        gitBranch: head.gitBranch,
        mtime,
        size,
        messageCount: counted.count
      }
      yield* Ref.update(cache, (map) => new Map(map).set(path, { size, mtimeMs: mtime.getTime(), counted, head, info }))
      return info
    }))
