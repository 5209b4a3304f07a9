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
import * as FileSystem from "@effect/platform/FileSystem"
import type { Transcript } from "@skein/protocol"
import type { Turn } from "@skein/session"
import { ResumeLoader, TranscriptLayout, TranscriptStore } from "@skein/store"
import { Cause, Clock, Data, Effect, Either, Exit, Option } from "effect"
import type * as CompactableSession from "./CompactableSession.js"
import { randomUUID } from "node:crypto"
import * as Path from "node:path"
import * as CompactBoundary from "./CompactBoundary.js"
import * as CompactPreparation from "./CompactPreparation.js"
import * as PostCompactRestore from "./PostCompactRestore.js"
import * as SessionMemoryCompaction from "./SessionMemoryCompaction.js"
import * as SummarizingCompaction from "./SummarizingCompaction.js"
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
 * Compacts a stored session with `summary` (the raw summary text): plans the
 * window over the view a resume would load, then appends the boundary in
 * one uninterruptible write.
 *
 * @since 0.0.0
 */
export const compactWith = Effect.fn("Compaction.compactWith")(function*(
  options: MemoryPassOptions & {
    readonly summary: string
    readonly pass: Pass
    /** The last entry `summary` covers; everything after it stays in the window. None: the whole view. */
    readonly lastSummarized?: string | undefined
    /** Restore recently read files, the plan and task state after the boundary (pass 2 does). */
    readonly restore?: PostCompactRestore.RestoreOptions | undefined
  }
) {
  const store = yield* TranscriptStore.TranscriptStore
  const path = store.layout.session(options.cwd, options.sessionId).transcript
  const view = yield* ResumeLoader.load(path)
  const planned = yield* SessionMemoryCompaction.plan(
    view,
    CompactBoundary.summaryText(options.summary),
    options.window,
    options.lastSummarized
  )
  if (Either.isLeft(planned)) return Outcome.Declined({ pass: options.pass, reason: planned.left })
  const plan = planned.right
  const restored = options.restore === undefined ? [] : yield* PostCompactRestore.restore(
    PostCompactRestore.select({
      dropped: plan.dropped,
      window: plan.window,
      exclude: [SessionMemoryCompaction.summaryPath(path)],
      plansDir: Path.join(store.layout.root, "plans"),
      maxFiles: options.restore.maxFiles
    }),
    { ...options.restore, cwd: options.cwd }
  )
  const discovered = CompactPreparation.discoveredTools(view.entries, view.boundary)
  const now = new Date(yield* Clock.currentTimeMillis)
  const written = CompactBoundary.entries(plan, {
    sessionId: options.sessionId,
    cwd: options.cwd,
    trigger: options.trigger ?? "manual",
    ...provenance(view.entries),
    lastPrompt: view.metadata.lastPrompt,
    metadata: discovered.length > 0 ? { preCompactDiscoveredTools: discovered } : undefined,
    now,
    uuid: randomUUID
  }, restored)
  yield* appendOnce(path, { cwd: options.cwd, sessionId: options.sessionId }, written)
  return Outcome.Compacted({
    pass: options.pass,
    preTokens: plan.preTokens,
    postTokens: plan.postTokens,
    droppedEntries: plan.dropped.length,
    retainedEntries: plan.window.length,
    boundaryUuid: written.boundaryUuid
  })
})

/**
 * One append, never cut by an interruption: the file holds the old view or
 * the new one. A write that fails part-way (a full disk) could leave the
 * boundary without its summary, which is neither: the file is cut back to
 * its size before the append, before any CLI reads it again.
 */
const appendOnce = (path: string, target: { readonly cwd: string; readonly sessionId: string }, written: CompactBoundary.Entries) =>
  Effect.gen(function*() {
    const store = yield* TranscriptStore.TranscriptStore
    const fs = yield* FileSystem.FileSystem
    const writer = yield* store.open(target)
    const size = yield* fs.stat(path).pipe(Effect.map((info) => Option.some(info.size)), Effect.orElseSucceed(() => Option.none()))
    yield* CompactBoundary.append(writer, written).pipe(
      Effect.tapError(() => Option.match(size, { onNone: () => Effect.void, onSome: (n) => Effect.ignore(fs.truncate(path, n)) }))
    )
  }).pipe(Effect.scoped, Effect.uninterruptible)

/**
 * The session's `summary.md` with the point it covers, unless a summary is
 * given (it then covers the whole view); declined when empty or a bare
 * template, with oversized sections cut.
 */
const memorySummary = (path: string, given: string | undefined) =>
  given !== undefined
    ? Effect.succeed(SessionMemoryCompaction.prepareSummary(given, SessionMemoryCompaction.summaryPath(path)))
    : SessionMemoryCompaction.readMemory(path)

/**
 * Pass 1 on a stored session whose CLI is not running: `summary.md` as the
 * summary, a retained window, one append.
 *
 * @since 0.0.0
 */
export const memoryPass = Effect.fn("Compaction.memoryPass")(function*(options: MemoryPassOptions) {
  const store = yield* TranscriptStore.TranscriptStore
  const path = store.layout.session(options.cwd, options.sessionId).transcript
  const summary = yield* memorySummary(path, options.summary)
  if (Either.isLeft(summary)) return Outcome.Declined({ pass: "memory", reason: summary.left })
  return yield* compactWith({
    ...options,
    summary: summary.right.text,
    lastSummarized: Option.getOrUndefined(summary.right.lastSummarized),
    pass: "memory"
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
  Started: { readonly pass: Pass | "cli"; readonly trigger: "manual" | "auto" }
  Finished: { readonly outcome: Outcome }
  /** The CLI's own `/compact` ran (`viaCli`); it says nothing of tokens but its turn's usage. */
  CliFinished: { readonly turn: Turn.TurnSummary }
  Failed: { readonly pass: Pass | "cli"; readonly error: string }
}>

/** @since 0.0.0 */
export const Event = Data.taggedEnum<Event>()

/**
 * What `run` needs of a session: exclusive use of its CLI at idle, the
 * options it was started with, and a place to say what happens.
 * `CompactableSession` is one.
 *
 * @since 0.0.0
 */
export type Host = Pick<CompactableSession.CompactableSession, "exclusive" | "options" | "publish">

/**
 * @since 0.0.0
 */
export interface RunOptions {
  /** `memory`, `summarize`, or `auto` (the default): pass 1, and pass 2 when pass 1 declines. */
  readonly pass?: Pass | "auto" | undefined
  readonly trigger?: "manual" | "auto" | undefined
  readonly window?: SessionMemoryCompaction.WindowOptions | undefined
  /** The summary pass 1 uses instead of the session's `summary.md`. */
  readonly summary?: string | undefined
  /** What pass 2 restores after the boundary (recently read files: 5, 50,000 tokens). */
  readonly restore?: PostCompactRestore.RestoreOptions | undefined
  /**
   * Runs at each step of a pass that writes, in the pass's fiber: tests
   * interrupt a pass there, deterministically.
   */
  readonly onStep?: ((step: Step) => Effect.Effect<void>) | undefined
}

/**
 * The steps of a pass that writes: the CLI is down and nothing is written
 * yet (`stopped`); the boundary is written and the CLI not yet resumed
 * (`written`).
 *
 * @since 0.0.0
 */
export type Step = "stopped" | "written"

/** Pass 2 keeps at least the last message when the usual window does not fit. */
const smallestWindow: SessionMemoryCompaction.WindowOptions = { minTokens: 1, minTextMessages: 1 }

/** Publishes a pass's start, and its outcome or failure. */
const announced = <A extends Outcome, E, R>(host: Host, pass: Pass, trigger: "manual" | "auto", effect: Effect.Effect<A, E, R>) =>
  host.publish(Event.Started({ pass, trigger })).pipe(
    Effect.zipRight(effect),
    Effect.onExit((exit) =>
      Exit.match(exit, {
        onSuccess: (outcome) => host.publish(Event.Finished({ outcome })),
        onFailure: (cause) => host.publish(Event.Failed({ pass, error: Cause.pretty(cause) }))
      })
    )
  )

/**
 * A pass over a live session, in the caller's fiber: at the session's
 * idle, with every `send` held off, it plans; when a pass will write, it
 * ends the CLI, appends the boundary, and resumes the CLI with the same id.
 * Pass 2 first asks a forked worker of the live CLI for the summary.
 * Interrupted at any point, the transcript holds the old view or the new
 * one, and the CLI is resumed either way.
 *
 * @since 0.0.0
 */
export const run = Effect.fn("Compaction.run")(function*(host: Host, options: RunOptions = {}) {
  const trigger = options.trigger ?? "manual"
  const pass = options.pass ?? "auto"
  const step = options.onStep ?? (() => Effect.void)
  /** The write, between the two steps, with the CLI down. */
  const write = <E, R>(effect: Effect.Effect<Outcome, E, R>) =>
    step("stopped").pipe(
      Effect.zipRight(effect),
      Effect.tap((outcome) => outcome._tag === "Compacted" ? step("written") : Effect.void)
    )
  return yield* host.exclusive((live) =>
    Effect.gen(function*() {
      const state = yield* live.session.state.get
      const sessionId = yield* live.sessionId
      const cwd = yield* TranscriptLayout.canonicalCwd(state.cwd)
      const target = { cwd, sessionId, trigger, window: options.window }
      const store = yield* TranscriptStore.TranscriptStore
      const path = store.layout.session(cwd, sessionId).transcript

      if (pass !== "summarize") {
        const memory = yield* announced(host, "memory", trigger, Effect.gen(function*() {
          const prepared = yield* memorySummary(path, options.summary)
          if (Either.isLeft(prepared)) return Outcome.Declined({ pass: "memory", reason: prepared.left })
          const summary = prepared.right.text
          const lastSummarized = Option.getOrUndefined(prepared.right.lastSummarized)
          // Plan while the CLI idles (reading is safe); end it only for a pass that will write.
          const view = yield* ResumeLoader.load(path)
          const planned = yield* SessionMemoryCompaction.plan(view, CompactBoundary.summaryText(summary), options.window, lastSummarized)
          if (Either.isLeft(planned)) return Outcome.Declined({ pass: "memory", reason: planned.left })
          return yield* live.suspend(() => write(compactWith({ ...target, summary, lastSummarized, pass: "memory" })))
        }))
        if (memory._tag === "Compacted" || pass === "memory") return memory
      }

      return yield* announced(host, "summarize", trigger, Effect.gen(function*() {
        const summary = yield* summarizeLive(live.session, host.options, path, sessionId)
        const restore = options.restore ?? {}
        return yield* live.suspend(() =>
          write(Effect.flatMap(compactWith({ ...target, summary, pass: "summarize", restore }), (outcome) =>
            outcome._tag === "Declined" && outcome.reason._tag !== "OverTarget"
              ? compactWith({ ...target, window: smallestWindow, summary, pass: "summarize", restore })
              : Effect.succeed(outcome)))
        )
      }))
    })
  )
})

/**
 * The CLI's own `/compact` (`{ via: "cli" }` in the terms): one turn
 * of the live session at its idle, with every other `send` and pass held
 * off. The CLI writes its boundary and summary itself, in its own words; no
 * restart is needed, since the CLI holds the file throughout.
 *
 * @since 0.0.0
 */
export const viaCli = Effect.fn("Compaction.viaCli")(function*(
  host: Pick<Host, "exclusive" | "publish">,
  options: { readonly instructions?: string | undefined } = {}
) {
  const command = options.instructions === undefined ? "/compact" : `/compact ${options.instructions}`
  return yield* host.exclusive((live) =>
    host.publish(Event.Started({ pass: "cli", trigger: "manual" })).pipe(
      Effect.zipRight(Effect.flatMap(live.session.send(command), (turn) => turn.result)),
      Effect.onExit((exit) =>
        Exit.match(exit, {
          onSuccess: (turn) => host.publish(Event.CliFinished({ turn })),
          onFailure: (cause) => host.publish(Event.Failed({ pass: "cli", error: Cause.pretty(cause) }))
        })
      )
    )
  )
})

/**
 * Pass 2's summary of a live session: a forked worker (the cache prefix is
 * the parent's) unless the history needs preparing, which changes the prefix
 * anyway; then a CLI over the prepared copy (`summarizeStored`).
 */
const summarizeLive = Effect.fnUntraced(function*(
  session: CompactableSession.Live["session"],
  launch: Host["options"],
  path: string,
  sessionId: string
) {
  const view = yield* ResumeLoader.load(path)
  const prepared = CompactPreparation.prepare(view.entries)
  if (!CompactPreparation.changed(prepared)) return yield* SummarizingCompaction.summarize(session, launch)
  return yield* SummarizingCompaction.summarizeStored({ launch, view, sessionId, entries: prepared.entries })
})

/** What `run` needs. */
export type RunContext = Effect.Effect.Context<ReturnType<typeof run>>

/** How `run` can fail. */
export type RunError = Effect.Effect.Error<ReturnType<typeof run>>
