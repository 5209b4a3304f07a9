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
 * @since 0.0.0
 */
import { Permissions, type Session, Worker } from "@skein/session"
import { Effect, Option, Schema } from "effect"

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
    permissions: Permissions.make(() => Effect.succeed(Permissions.deny("compaction runs no tools")))
  })
  const result = yield* worker.result.pipe(
    Effect.mapError((error) => new SummaryFailed({ reason: `the summarizing worker failed: ${error._tag}` }))
  )
  if (result.isError || result.interrupted) {
    return yield* new SummaryFailed({ reason: `the summarizing worker ended with ${result.subtype ?? "an error"}` })
  }
  return yield* Option.match(extract(result.text ?? ""), {
    onNone: () => Effect.fail(new SummaryFailed({ reason: "the summarizing worker answered no text" })),
    onSome: Effect.succeed
  })
}, Effect.scoped)
