/**
 * Pass 2, summarizing compaction: one model call writes the summary.
 *
 * The call is a forked worker of the live CLI (`Worker`): it resumes the
 * parent with `--fork-session`, so its request carries the parent's
 * messages as the prefix and the prompt cache hits, and it records to a
 * sidechain, never to the parent's chain. It keeps the parent's tool list
 * (changing it would change the cached prefix) but may not use any: it
 * runs one turn (`maxTurns: 1`) under a permission handler that denies
 * everything, so a tool call ends the turn without a summary, which is a
 * failure of the pass.
 *
 * When the history must be prepared first (`CompactPreparation`: images
 * and documents to placeholders, skill listings stripped), the live
 * session's prefix is no longer the request's, so forking gains nothing:
 * `summarizeStored` writes the prepared view as a throwaway session, asks
 * a CLI resumed over it, and removes it. The offline pass does the same
 * over a stored session.
 *
 * @since 0.0.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import type { Transcript } from "@skein/protocol"
import { Permissions, Session, Worker } from "@skein/session"
import { Branch, type ResumeLoader, TranscriptLayout, TranscriptStore } from "@skein/store"
import { Clock, Effect, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"

/**
 * The worker gave no summary.
 *
 * @since 0.0.0
 */
export class SummaryFailed extends Schema.TaggedError<SummaryFailed>()("SummaryFailed", {
  reason: Schema.String
}) {}

/**
 * What the worker is asked.
 *
 * @since 0.0.0
 */
export const prompt = [
  "Context compaction: write a summary of the conversation so far, to replace it in your context.",
  "Do not call any tool; answer with text only.",
  "Cover, in this order: what the user asked for and why; decisions made and constraints learned;",
  "files, commands and code that matter, with exact names; errors met and how they were fixed;",
  "what is done; what is pending; and the very next step, quoting the latest request word for word.",
  "Put the whole summary inside <summary></summary> tags."
].join("\n")

const denyAll = Permissions.make(() => Effect.succeed(Permissions.deny("compaction runs no tools")))

/** The text between the last `<summary>` tags, or the whole answer. */
export const extract = (text: string): Option.Option<string> => {
  const match = /<summary>([\s\S]*?)<\/summary>/g
  let last: string | undefined
  for (const found of text.matchAll(match)) last = found[1]
  const summary = (last ?? text).trim()
  return summary.length > 0 ? Option.some(summary) : Option.none()
}

/**
 * Asks a forked worker of `parent` for the summary. `launch` are the
 * options the parent was started with, so that the fork's prefix matches.
 *
 * @since 0.0.0
 */
export const summarize = Effect.fn("SummarizingCompaction.summarize")(function*(
  parent: Session.Session,
  launch: Session.SessionOptions
) {
  const workers = yield* Worker.pool(parent, { launch, concurrency: 1 })
  const worker = yield* workers.fork({
    label: "compact",
    description: "summarize for compaction",
    prompt,
    maxTurns: 1,
    toolkits: "none",
    permissions: denyAll
  })
  const result = yield* worker.result.pipe(
    Effect.mapError((error) => new SummaryFailed({ reason: `the summarizing worker failed: ${error._tag}` }))
  )
  return yield* summaryOf(result, "summarizing worker")
}, Effect.scoped)

/** The answer of a summary turn, or why there is none. */
const summaryOf = (
  result: {
    readonly isError: boolean
    readonly interrupted: boolean
    readonly subtype?: string | undefined
    readonly text?: string | undefined
    /** Why the turn failed, in the CLI's words (no login, an API error). */
    readonly failure?: { readonly text: string } | undefined
  },
  who: string
) => {
  if (result.interrupted) return Effect.fail(new SummaryFailed({ reason: `the ${who} was interrupted` }))
  if (result.isError) {
    return Effect.fail(new SummaryFailed({ reason: `the ${who} failed: ${result.failure?.text ?? `it ended with ${result.subtype ?? "an error"}`}` }))
  }
  return Option.match(extract(result.text ?? ""), {
    onNone: () => Effect.fail(new SummaryFailed({ reason: `the ${who} answered no text` })),
    onSome: Effect.succeed
  })
}

/**
 * Asks for the summary of `entries` (a prepared view of a stored session)
 * with a CLI of its own: the entries are written as a throwaway session in
 * the same project (a straight chain, as `Branch` writes one), a CLI
 * resumed over it runs one turn (`maxTurns: 1`, tools denied), and the
 * throwaway file is removed whatever happens. The stored session is only read.
 *
 * @since 0.0.0
 */
export const summarizeStored = Effect.fn("SummarizingCompaction.summarizeStored")(function*(input: {
  /** How to run the CLI (cwd, executable, environment, config dir). */
  readonly launch: Session.SessionOptions
  readonly view: ResumeLoader.Conversation
  readonly sessionId: string
  readonly entries: ReadonlyArray<Transcript.ChainEntry>
}) {
  const fs = yield* FileSystem.FileSystem
  const store = yield* TranscriptStore.TranscriptStore
  const leaf = input.entries[input.entries.length - 1]
  if (leaf === undefined) return yield* new SummaryFailed({ reason: "nothing to summarize" })
  const copyId = randomUUID()
  const cwd = yield* TranscriptLayout.canonicalCwd(input.launch.cwd)
  const paths = store.layout.session(cwd, copyId)
  const { lines } = Branch.render({ ...input.view, entries: input.entries }, {
    sessionId: copyId,
    parentSessionId: input.sessionId,
    at: leaf.uuid,
    now: new Date(yield* Clock.currentTimeMillis)
  })
  const text = lines.map((line) => JSON.stringify(line)).join("\n") + "\n"
  yield* Effect.acquireRelease(
    fs.writeFileString(paths.transcript, text, { mode: 0o600 }).pipe(
      Effect.mapError((e) => new SummaryFailed({ reason: `cannot write the prepared history: ${e.message}` }))
    ),
    () => Effect.ignore(Effect.zipRight(fs.remove(paths.transcript), fs.remove(paths.sessionDir, { recursive: true })))
  )
  const session = yield* Session.start({
    ...input.launch,
    resume: copyId,
    forkSession: undefined,
    continue: undefined,
    maxTurns: 1,
    allowedTools: []
  }).pipe(Effect.provideService(Permissions.Permissions, denyAll))
  const result = yield* session.send(prompt).pipe(
    Effect.flatMap((turn) => turn.result),
    Effect.mapError((error) => new SummaryFailed({ reason: `the summarizing CLI failed: ${error._tag}` }))
  )
  yield* session.end
  yield* session.exit
  return yield* summaryOf(result, "summarizing CLI")
}, Effect.scoped)
