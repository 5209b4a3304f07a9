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
import type { ProcessHost } from "@skein/kernel"
import type { Transcript } from "@skein/protocol"
import type { SessionError } from "@skein/session"
import { ResumeLoader, TranscriptLayout, TranscriptStore } from "@skein/store"
import { Cause, Clock, Data, Effect, Either, Exit, Option } from "effect"
import type * as CompactableSession from "./CompactableSession.js"
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
  // One append, never cut by an interruption: the file holds the old view or the new one.
  yield* Effect.uninterruptible(Effect.scoped(
    Effect.flatMap(store.open({ cwd: options.cwd, sessionId: options.sessionId }), (writer) =>
      CompactBoundary.append(writer, written))
  ))
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

// ---------------------------------------------------------------------------
// A pass over a live session
// ---------------------------------------------------------------------------

/**
 * What a session publishes about a pass.
 *
 * @since 0.0.0
 */
export type Event = Data.TaggedEnum<{
  Started: { readonly pass: Pass; readonly trigger: "manual" | "auto" }
  Finished: { readonly outcome: Outcome }
  Failed: { readonly pass: Pass; readonly error: string }
}>

/** @since 0.0.0 */
export const Event = Data.taggedEnum<Event>()

/**
 * What `run` needs of a session: a way to set its CLI aside, and a place to
 * say what happens. `CompactableSession` is one.
 *
 * @since 0.0.0
 */
export interface Host {
  readonly suspend: CompactableSession.CompactableSession["suspend"]
  readonly publish: (event: Event) => Effect.Effect<void>
}

/**
 * @since 0.0.0
 */
export interface RunOptions {
  readonly trigger?: "manual" | "auto" | undefined
  readonly window?: SessionMemoryCompaction.WindowOptions | undefined
  /** The summary to use instead of the session's `summary.md`. */
  readonly summary?: string | undefined
}

/**
 * A pass over a live session, in the caller's fiber: waits for the
 * session's idle, ends its CLI, plans, appends the boundary, and resumes the
 * CLI with the same id. Interrupted at any point, it leaves the transcript
 * as it was or fully compacted, and the CLI is resumed either way.
 *
 * @since 0.0.0
 */
export const run = Effect.fn("Compaction.run")(function*(host: Host, options: RunOptions = {}) {
  const trigger = options.trigger ?? "manual"
  yield* host.publish(Event.Started({ pass: "memory", trigger }))
  return yield* host.suspend((stopped) =>
    Effect.flatMap(TranscriptLayout.canonicalCwd(stopped.cwd), (cwd) =>
      memoryPass({ cwd, sessionId: stopped.sessionId, trigger, window: options.window, summary: options.summary }))
  ).pipe(
    Effect.onExit((exit) =>
      Exit.match(exit, {
        onSuccess: (outcome) => host.publish(Event.Finished({ outcome })),
        onFailure: (cause) => host.publish(Event.Failed({ pass: "memory", error: Cause.pretty(cause) }))
      })
    )
  )
})

/** What `run` needs. */
export type RunContext = MemoryPassContext | ProcessHost.ProcessHost

/** How `run` can fail. */
export type RunError = Effect.Effect.Error<ReturnType<typeof memoryPass>> | SessionError.TurnError
