/**
 * The CLI's transcript, mirrored into SQL as it is written, and restored
 * byte for byte on a machine that lacks it, so `--resume` works there.
 *
 * `sync` copies what the session's files gained since the last sync: JSONL
 * (the main chain, subagent sidechains) as rows of lines with their byte
 * offsets, in order, a torn or unfinished last line kept as it is; other
 * files (`session-memory/summary.md`, `.meta.json`) whole. It reads the
 * mirrored length from the database, so after a failed sync (the database
 * was down) the next one catches up from there. Before appending it checks
 * that the last mirrored row still matches the file; a file that shrank or
 * changed under the mirror is a `MirrorDiverged`, never overwritten.
 *
 * `restore` writes the files back under another config root (0600 files,
 * 0700 folders), appending to a file that holds an older prefix.
 *
 * @since 0.0.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as MirrorCache from "./internal/mirrorCache.js"
import * as MirrorRestore from "./internal/mirrorRestore.js"
import * as MirrorSync from "./internal/mirrorSync.js"
import { MirrorDiverged, reasonOf, StoreFailed, TranscriptNotMirrored } from "./SqlStoreError.js"
import { SqlStore } from "./SqlStore.js"

/**
 * @since 0.0.0
 */
export interface Target {
  /** The CLI's config root (`CLAUDE_CONFIG_DIR`) the session writes under. */
  readonly configDir: string
  readonly cliSessionId: string
  /** skein's `ses_` id, kept with the rows. */
  readonly sessionId?: string | undefined
}

/**
 * What a sync or restore did: bytes copied per relative path.
 *
 * @since 0.0.0
 */
export interface Report {
  readonly files: ReadonlyArray<{ readonly path: string; readonly bytes: number }>
}

/**
 * @since 0.0.0
 */
export class TranscriptMirror extends Context.Tag("@skein/sql/TranscriptMirror")<TranscriptMirror, {
  readonly sync: (target: Target) => Effect.Effect<Report, MirrorDiverged | StoreFailed>
  readonly restore: (cliSessionId: string, configDir: string) => Effect.Effect<Report, MirrorDiverged | StoreFailed | TranscriptNotMirrored>
}>() {}

/**
 * @since 0.0.0
 */
export const make = Effect.gen(function*() {
  const store = yield* SqlStore
  const failed = (operation: string) => (cause: unknown) =>
    cause instanceof MirrorDiverged ? cause : new StoreFailed({ operation, reason: reasonOf(cause) })
  // One sync of a session at a time in this process: two would read the same mirrored length.
  const lock = yield* Effect.makeSemaphore(1)
  const cache = MirrorCache.make()

  const sync = (target: Target) =>
    lock.withPermits(1)(MirrorSync.sync(store, cache, target)).pipe(
      Effect.mapError(failed("mirror sync")),
      Effect.withSpan("TranscriptMirror.sync")
    )

  const restore = (cliSessionId: string, configDir: string) =>
    MirrorRestore.restore(store, cliSessionId, configDir).pipe(
      Effect.mapError((e) => e instanceof TranscriptNotMirrored ? e : failed("restore")(e)),
      Effect.withSpan("TranscriptMirror.restore")
    )

  return TranscriptMirror.of({ sync, restore })
})

/**
 * @since 0.0.0
 */
export const layer: Layer.Layer<TranscriptMirror, never, SqlStore> = Layer.effect(TranscriptMirror, make)
