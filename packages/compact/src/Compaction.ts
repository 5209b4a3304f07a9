/**
 * Compaction passes over a stored session: plan from the view a resumed CLI
 * would load, then append the boundary through the session's single writer.
 *
 * A pass never runs beside a live CLI: `TranscriptStore` refuses a session a
 * live process holds (`TranscriptLive`) and leaves the file as it was. The
 * supervised form, which ends the CLI first and resumes it after, is `run`.
 *
 * @since 0.0.0
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import type { Transcript } from "@skein/protocol"
import { ResumeLoader, TranscriptStore } from "@skein/store"
import { Clock, Data, Effect, Either, Option } from "effect"
import { randomUUID } from "node:crypto"
import * as CompactBoundary from "./CompactBoundary.js"
import * as SessionMemoryCompaction from "./SessionMemoryCompaction.js"
import type * as TokenCounter from "./TokenCounter.js"

/**
 * @since 0.0.0
 */
export type Pass = "memory" | "summarize"

/**
 * What a pass did.
 *
 * @since 0.0.0
 */
export type Outcome = Data.TaggedEnum<{
  Compacted: {
    readonly pass: Pass
    readonly preTokens: number
    readonly postTokens: number
    /** Entries of the old view left behind the boundary. */
    readonly droppedEntries: number
    readonly retainedEntries: number
    readonly boundaryUuid: string
  }
  /** The pass wrote nothing, and why; the caller may try the next pass. */
  Declined: { readonly pass: Pass; readonly reason: SessionMemoryCompaction.Declined }
}>

/** @since 0.0.0 */
export const Outcome = Data.taggedEnum<Outcome>()

/**
 * @since 0.0.0
 */
export interface MemoryPassOptions {
  readonly cwd: string
  readonly sessionId: string
  readonly trigger?: "manual" | "auto" | undefined
  readonly window?: SessionMemoryCompaction.WindowOptions | undefined
  /** The summary to use instead of the session's `summary.md`. */
  readonly summary?: string | undefined
}

/** The CLI version and branch the session ran with, from its newest entry that has them. */
const provenance = (entries: ReadonlyArray<Transcript.ChainEntry>) => {
  for (let i = entries.length - 1; i >= 0; i--) {
    const entry = entries[i]!
    if (entry.version !== undefined) return { version: entry.version, gitBranch: entry.gitBranch }
  }
  return { version: undefined, gitBranch: undefined }
}

/**
 * Pass 1 on a stored session whose CLI is not running: `summary.md` as the
 * summary, a retained window, one append.
 *
 * @since 0.0.0
 */
export const memoryPass = Effect.fn("Compaction.memoryPass")(function*(options: MemoryPassOptions) {
  const store = yield* TranscriptStore.TranscriptStore
  const path = store.layout.session(options.cwd, options.sessionId).transcript
  const view = yield* ResumeLoader.load(path)
  const summary = options.summary !== undefined
    ? Option.some(options.summary)
    : yield* SessionMemoryCompaction.readSummary(path)
  if (Option.isNone(summary)) {
    return Outcome.Declined({
      pass: "memory",
      reason: SessionMemoryCompaction.Declined.NoSummary({ path: SessionMemoryCompaction.summaryPath(path) })
    })
  }
  const planned = yield* SessionMemoryCompaction.plan(view, CompactBoundary.summaryText(summary.value), options.window)
  if (Either.isLeft(planned)) return Outcome.Declined({ pass: "memory", reason: planned.left })
  const plan = planned.right
  const now = new Date(yield* Clock.currentTimeMillis)
  const written = CompactBoundary.entries(plan, {
    sessionId: options.sessionId,
    cwd: options.cwd,
    trigger: options.trigger ?? "manual",
    ...provenance(view.entries),
    lastPrompt: view.metadata.lastPrompt,
    now,
    uuid: randomUUID
  })
  yield* Effect.scoped(
    Effect.flatMap(store.open({ cwd: options.cwd, sessionId: options.sessionId }), (writer) =>
      CompactBoundary.append(writer, written))
  )
  return Outcome.Compacted({
    pass: "memory",
    preTokens: plan.preTokens,
    postTokens: plan.postTokens,
    droppedEntries: plan.dropped.length,
    retainedEntries: plan.window.length,
    boundaryUuid: written.boundaryUuid
  })
})

/** What `memoryPass` needs. */
export type MemoryPassContext = TranscriptStore.TranscriptStore | FileSystem.FileSystem | TokenCounter.TokenCounter
