/**
 * Pass 1, session-memory compaction: the session's `summary.md` becomes the
 * summary, with no model call, and a window of the most recent messages is
 * kept verbatim after it.
 *
 * The planner is pure. It takes the effective view a resumed CLI would load
 * (`ResumeLoader`), grows the window back from the leaf until it holds
 * `minTokens` tokens or `minTextMessages` messages with text, then moves the
 * cut further back until it splits nothing: no `tool_result` without its
 * `tool_use`, and no API message (its thinking blocks, its parallel tool
 * calls: one transcript entry per block) cut in two. When the summary plus
 * that window is still over `targetTokens`, or the window would keep the
 * whole view, it declines, and the caller falls back to the summarizing pass.
 * It never forces a bad cut.
 *
 * @since 0.0.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import type { Anthropic, Transcript } from "@skein/protocol"
import type { ResumeLoader } from "@skein/store"
import { Data, Effect, Either, Option } from "effect"
import * as Path from "node:path"
import * as TokenCounter from "./TokenCounter.js"

/**
 * @since 0.0.0
 */
export interface WindowOptions {
  /** The window holds at least this many tokens (or `minTextMessages`). Default 10,000. */
  readonly minTokens?: number | undefined
  /** Or at least this many messages with a text block. Default 5. */
  readonly minTextMessages?: number | undefined
  /** Summary plus window must fit in this many tokens, or the pass declines. Default 160,000. */
  readonly targetTokens?: number | undefined
}

/** @since 0.0.0 */
export const defaults = { minTokens: 10_000, minTextMessages: 5, targetTokens: 160_000 } as const

/**
 * Why the pass wrote nothing.
 *
 * @since 0.0.0
 */
export type Declined = Data.TaggedEnum<{
  /** There is no `summary.md`, or it is empty. */
  NoSummary: { readonly path: string }
  /** The view has no message to compact. */
  Empty: {}
  /** A valid window would keep every message: compacting would drop nothing. */
  KeepsEverything: { readonly windowTokens: number }
  /** Summary plus window are over the target. */
  OverTarget: { readonly summaryTokens: number; readonly windowTokens: number; readonly targetTokens: number }
}>

/** @since 0.0.0 */
export const Declined = Data.taggedEnum<Declined>()

/**
 * A planned cut of the view.
 *
 * @since 0.0.0
 */
export interface Plan {
  /** The summary entry's text, as the resumed model reads it. */
  readonly summary: string
  /** The entries kept verbatim, in chain order: a suffix of the view, ending at its leaf. */
  readonly window: ReadonlyArray<Transcript.ChainEntry>
  /** The entries before the window: they leave the view. */
  readonly dropped: ReadonlyArray<Transcript.ChainEntry>
  /** The view's leaf before compaction (the last entry). */
  readonly oldLeafUuid: string
  /** The view before compaction, as counted. */
  readonly preTokens: number
  readonly summaryTokens: number
  readonly windowTokens: number
  /** Summary plus window. */
  readonly postTokens: number
}

/** The message one chain entry contributes to a request, as `ResumeLoader.toMessages` sees it. */
export const messageOf = (entry: Transcript.ChainEntry): Option.Option<Anthropic.MessageParam> => {
  switch (entry.type) {
    case "user":
      return Option.some({ role: "user", content: entry.message.content })
    case "assistant":
      return Option.some({ role: "assistant", content: entry.message.content })
    default:
      return Option.none()
  }
}

const blocksOf = (entry: Transcript.ChainEntry): ReadonlyArray<Anthropic.ContentBlock> => {
  if (entry.type !== "user" && entry.type !== "assistant") return []
  const content = entry.message.content
  return typeof content === "string" ? [{ type: "text", text: content }] : content
}

/** Whether the entry is a message with a text block (the unit of `minTextMessages`). */
export const hasText = (entry: Transcript.ChainEntry): boolean =>
  blocksOf(entry).some((block) => block.type === "text")

/** The `tool_use` ids an entry calls. */
export const toolUses = (entry: Transcript.ChainEntry): ReadonlyArray<string> =>
  entry.type !== "assistant" ? [] : blocksOf(entry).flatMap((block) =>
    block.type === "tool_use" && "id" in block && typeof block.id === "string" ? [block.id] : []
  )

/** The `tool_use` ids an entry answers. */
export const toolResults = (entry: Transcript.ChainEntry): ReadonlyArray<string> =>
  entry.type !== "user" ? [] : blocksOf(entry).flatMap((block) =>
    block.type === "tool_result" && "tool_use_id" in block && typeof block.tool_use_id === "string"
      ? [block.tool_use_id]
      : []
  )

/**
 * The latest cut at or before `start` that splits nothing: every result in
 * the window has its call in the window, and every entry of an API message
 * in the window (the CLI writes one entry per block: thinking, text, each
 * parallel call) has all its siblings there too.
 *
 * @since 0.0.0
 */
export const safeStart = (entries: ReadonlyArray<Transcript.ChainEntry>, start: number): number => {
  const callAt = new Map<string, number>()
  const firstOfMessage = new Map<string, number>()
  entries.forEach((entry, index) => {
    for (const id of toolUses(entry)) if (!callAt.has(id)) callAt.set(id, index)
    if (entry.type === "assistant" && !firstOfMessage.has(entry.message.id)) firstOfMessage.set(entry.message.id, index)
  })
  /** The earliest entry that entry `i` cannot be kept without. */
  const needs = (i: number): number => {
    const entry = entries[i]!
    let need = entry.type === "assistant" ? firstOfMessage.get(entry.message.id) ?? i : i
    for (const id of toolResults(entry)) need = Math.min(need, callAt.get(id) ?? i)
    return need
  }
  let cut = Math.max(0, Math.min(start, entries.length))
  for (let i = entries.length - 1; i >= cut; i--) cut = Math.min(cut, needs(i))
  return cut
}

/**
 * Plans the cut of `entries` (a view's chain) given each entry's tokens.
 *
 * @since 0.0.0
 */
export const planWindow = (input: {
  readonly entries: ReadonlyArray<Transcript.ChainEntry>
  readonly tokens: ReadonlyArray<number>
  readonly summary: string
  readonly summaryTokens: number
  readonly options?: WindowOptions | undefined
}): Either.Either<Plan, Declined> => {
  const { entries, tokens } = input
  const minTokens = input.options?.minTokens ?? defaults.minTokens
  const minTextMessages = input.options?.minTextMessages ?? defaults.minTextMessages
  const targetTokens = input.options?.targetTokens ?? defaults.targetTokens
  const leaf = entries[entries.length - 1]
  if (leaf === undefined || !entries.some((e) => Option.isSome(messageOf(e)))) return Either.left(Declined.Empty())

  let start = entries.length
  let windowTokens = 0
  let texts = 0
  while (start > 0 && windowTokens < minTokens && texts < minTextMessages) {
    start -= 1
    windowTokens += tokens[start] ?? 0
    if (hasText(entries[start]!)) texts += 1
  }
  start = safeStart(entries, start)
  const window = entries.slice(start)
  const dropped = entries.slice(0, start)
  windowTokens = tokens.slice(start).reduce((a, b) => a + b, 0)
  if (!dropped.some((e) => Option.isSome(messageOf(e)))) return Either.left(Declined.KeepsEverything({ windowTokens }))
  const postTokens = input.summaryTokens + windowTokens
  if (postTokens > targetTokens) {
    return Either.left(Declined.OverTarget({ summaryTokens: input.summaryTokens, windowTokens, targetTokens }))
  }
  return Either.right({
    summary: input.summary,
    window,
    dropped,
    oldLeafUuid: leaf.uuid,
    preTokens: tokens.reduce((a, b) => a + b, 0),
    summaryTokens: input.summaryTokens,
    windowTokens,
    postTokens
  })
}

/**
 * Plans pass 1 over a loaded view, counting with the `TokenCounter`.
 *
 * @since 0.0.0
 */
export const plan = Effect.fn("SessionMemoryCompaction.plan")(function*(
  view: ResumeLoader.Conversation,
  summary: string,
  options?: WindowOptions
) {
  const counter = yield* TokenCounter.TokenCounter
  const tokens = yield* Effect.forEach(view.entries, (entry) =>
    Option.match(messageOf(entry), {
      onNone: () => Effect.succeed(0),
      onSome: (message) => counter.count([message])
    }))
  const summaryTokens = yield* counter.count([{ role: "user", content: summary }])
  return planWindow({ entries: view.entries, tokens, summary, summaryTokens, options })
})

/**
 * Where the CLI keeps a session's memory summary: `<session dir>/session-memory/summary.md`,
 * beside `<session>.jsonl`.
 *
 * @since 0.0.0
 */
export const summaryPath = (transcriptPath: string): string =>
  Path.join(transcriptPath.replace(/\.jsonl$/, ""), "session-memory", "summary.md")

/**
 * The session's summary, if it has a non-empty one.
 *
 * @since 0.0.0
 */
export const readSummary = Effect.fn("SessionMemoryCompaction.readSummary")(function*(transcriptPath: string) {
  const fs = yield* FileSystem.FileSystem
  const text = yield* fs.readFileString(summaryPath(transcriptPath)).pipe(Effect.option)
  return Option.filter(Option.map(text, (t) => t.trim()), (t) => t.length > 0)
})
