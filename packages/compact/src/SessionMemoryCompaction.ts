/**
 * Pass 1, session-memory compaction: the session's `summary.md` becomes the
 * summary, with no model call, and a window of the most recent messages is
 * kept verbatim after it.
 *
 * The planner is pure and follows the CLI's rule. It takes the effective
 * view a resumed CLI would load (`ResumeLoader`). Everything after the
 * point the summary covers (`lastSummarized`, the CLI's
 * `lastSummarizedMessageId`) is kept, whatever its size. From there the
 * window grows back towards the start until it holds **both** `minTokens`
 * tokens and `minTextMessages` messages with text, or until it reaches
 * `maxTokens`, and never past the last compact boundary. Then the cut moves
 * further back until it splits nothing: no `tool_result` without its
 * `tool_use`, and no API message (its thinking blocks, its parallel tool
 * calls: one transcript entry per block) cut in two. When the summary plus
 * that window is still over `targetTokens`, or the window would keep the
 * whole view, it declines, and the caller falls back to the summarizing pass.
 * It never forces a bad cut.
 *
 * The summary itself is declined when empty or when it holds only a
 * template's headings, and a section over `maxSectionTokens` is cut at a
 * line boundary, as the CLI does before it uses `summary.md`.
 *
 * @since 0.0.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import type { Anthropic } from "@skein/protocol"
import { Transcript } from "@skein/protocol"
import { type ResumeLoader, SummaryCoverage } from "@skein/store"
import { Data, Effect, Either, Option } from "effect"
import * as Path from "node:path"
import * as TokenCounter from "./TokenCounter.js"

/**
 * @since 0.0.0
 */
export interface WindowOptions {
  /** The window grows until it holds at least this many tokens and `minTextMessages`. Default 10,000. */
  readonly minTokens?: number | undefined
  /** And at least this many messages with a text block. Default 5. */
  readonly minTextMessages?: number | undefined
  /** It stops growing at this many tokens even if one minimum is not met. Default 40,000. */
  readonly maxTokens?: number | undefined
  /** Summary plus window must fit in this many tokens, or the pass declines. Default 160,000. */
  readonly targetTokens?: number | undefined
}

/** @since 0.0.0 */
export const defaults = { minTokens: 10_000, minTextMessages: 5, maxTokens: 40_000, targetTokens: 160_000 } as const

/**
 * Why the pass wrote nothing.
 *
 * @since 0.0.0
 */
export type Declined = Data.TaggedEnum<{
  /** There is no `summary.md`, or it is empty. */
  NoSummary: { readonly path: string }
  /** `summary.md` holds only a template: headings and their italic descriptions, nothing written under them. */
  TemplateOnly: { readonly path: string }
  /** The message the summary covers up to is not in the view (compacted away, or on another branch). */
  CoveredMessageMissing: { readonly uuid: string }
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
 * Where the window may start at the earliest: just after the last compact
 * boundary in `entries` (0 when there is none). What came before it is
 * already behind a summary.
 *
 * @since 0.0.0
 */
export const floorOf = (entries: ReadonlyArray<Transcript.ChainEntry>): number => {
  for (let i = entries.length - 1; i >= 0; i--) if (Transcript.isCompactBoundary(entries[i]!)) return i + 1
  return 0
}

/**
 * Where the window starts before the cut is made safe: after the covered
 * point (`from`), then back one entry at a time until the window holds both
 * minimums or reaches `maxTokens`, but not before `floor`.
 */
const growBack = (
  entries: ReadonlyArray<Transcript.ChainEntry>,
  tokens: ReadonlyArray<number>,
  from: number,
  floor: number,
  limits: { readonly minTokens: number; readonly minTextMessages: number; readonly maxTokens: number }
): number => {
  let windowTokens = 0
  let texts = 0
  for (let i = from; i < entries.length; i++) {
    windowTokens += tokens[i] ?? 0
    if (hasText(entries[i]!)) texts += 1
  }
  const enough = () =>
    windowTokens >= limits.maxTokens || (windowTokens >= limits.minTokens && texts >= limits.minTextMessages)
  let start = from
  while (start > floor && !enough()) {
    start -= 1
    windowTokens += tokens[start] ?? 0
    if (hasText(entries[start]!)) texts += 1
  }
  return start
}

/**
 * Plans the cut of `entries` (a view's chain) given each entry's tokens.
 * `lastSummarized` is the last entry the summary covers; without it the
 * summary covers the whole view (a summary just written, or one whose point
 * was not recorded, as the CLI takes it).
 *
 * @since 0.0.0
 */
export const planWindow = (input: {
  readonly entries: ReadonlyArray<Transcript.ChainEntry>
  readonly tokens: ReadonlyArray<number>
  readonly summary: string
  readonly summaryTokens: number
  readonly lastSummarized?: string | undefined
  readonly options?: WindowOptions | undefined
}): Either.Either<Plan, Declined> => {
  const { entries, tokens } = input
  const limits = {
    minTokens: input.options?.minTokens ?? defaults.minTokens,
    minTextMessages: input.options?.minTextMessages ?? defaults.minTextMessages,
    maxTokens: input.options?.maxTokens ?? defaults.maxTokens
  }
  const targetTokens = input.options?.targetTokens ?? defaults.targetTokens
  const leaf = entries[entries.length - 1]
  if (leaf === undefined || !entries.some((e) => Option.isSome(messageOf(e)))) return Either.left(Declined.Empty())
  const covered = input.lastSummarized === undefined
    ? entries.length - 1
    : entries.findIndex((entry) => entry.uuid === input.lastSummarized)
  if (covered === -1) return Either.left(Declined.CoveredMessageMissing({ uuid: input.lastSummarized ?? "" }))

  const floor = floorOf(entries)
  const start = safeStart(entries, growBack(entries, tokens, Math.max(covered + 1, floor), floor, limits))
  const window = entries.slice(start)
  const dropped = entries.slice(0, start)
  const windowTokens = tokens.slice(start).reduce((a, b) => a + b, 0)
  if (!dropped.slice(floor).some((e) => Option.isSome(messageOf(e)))) {
    return Either.left(Declined.KeepsEverything({ windowTokens }))
  }
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
  options?: WindowOptions,
  lastSummarized?: string
) {
  const counter = yield* TokenCounter.TokenCounter
  const tokens = yield* Effect.forEach(view.entries, (entry) =>
    Option.match(messageOf(entry), {
      onNone: () => Effect.succeed(0),
      onSome: (message) => counter.count([message])
    }))
  const summaryTokens = yield* counter.count([{ role: "user", content: summary }])
  return planWindow({ entries: view.entries, tokens, summary, summaryTokens, lastSummarized, options })
})

/**
 * Where the CLI keeps a session's memory summary: `<session dir>/session-memory/summary.md`,
 * beside `<session>.jsonl`.
 *
 * @since 0.0.0
 */
export const summaryPath = (transcriptPath: string): string =>
  Path.join(transcriptPath.replace(/\.jsonl$/, ""), "session-memory", "summary.md")

// ---------------------------------------------------------------------------
// The summary
// ---------------------------------------------------------------------------

/**
 * Tokens one section of the summary may hold before it is cut (the CLI's
 * figure), counted as the CLI counts here: 4 characters a token.
 *
 * @since 0.0.0
 */
export const maxSectionTokens = 2_000

/** @since 0.0.0 */
export const maxSectionChars = maxSectionTokens * 4

/** @since 0.0.0 */
export const truncationNote = "[… section cut: it was over 2,000 tokens]"

const heading = /^(#{1,6})\s/

/** A line a template has and a writer has not filled: blank, a heading, or an italic description. */
const isTemplateLine = (line: string): boolean => {
  const t = line.trim()
  return t === "" || heading.test(t) || /^_[^_].*_$/.test(t) || /^\*[^*].*\*$/.test(t)
}

/**
 * Whether the summary holds nothing of its own: empty, or only headings and
 * the italic descriptions a template puts under them (the CLI's own
 * template, or one like it).
 *
 * @since 0.0.0
 */
export const isTemplateOnly = (text: string): boolean => text.split(/\r?\n/).every(isTemplateLine)

/** One section: its heading line (none before the first heading) and its body lines. */
interface Section {
  readonly heading: Option.Option<string>
  readonly body: Array<string>
}

const sectionsOf = (lines: ReadonlyArray<string>, level: number): Array<Section> => {
  const sections: Array<Section> = [{ heading: Option.none(), body: [] }]
  for (const line of lines) {
    const match = heading.exec(line)
    if (match !== null && match[1]!.length === level) sections.push({ heading: Option.some(line), body: [] })
    else sections[sections.length - 1]!.body.push(line)
  }
  return sections
}

/** A section's body cut at the last whole line within `maxChars`, with the note after it. */
const cutSection = (section: Section, maxChars: number): { readonly lines: Array<string>; readonly cut: boolean } => {
  const head = Option.toArray(section.heading)
  if (Option.isNone(section.heading) || section.body.join("\n").length <= maxChars) {
    return { lines: [...head, ...section.body], cut: false }
  }
  const kept: Array<string> = []
  let chars = 0
  for (const line of section.body) {
    if (chars + line.length + 1 > maxChars) break
    kept.push(line)
    chars += line.length + 1
  }
  return { lines: [...head, ...kept, truncationNote], cut: true }
}

/**
 * The summary as compaction uses it: each section (split at the top
 * heading level present) whose body is over `maxChars` is cut at a line
 * boundary and marked. Text before the first heading is left whole, as the
 * CLI leaves it.
 *
 * @since 0.0.0
 */
export const truncateSections = (
  text: string,
  maxChars: number = maxSectionChars
): { readonly text: string; readonly truncated: boolean } => {
  const lines = text.split(/\r?\n/)
  const levels = lines.flatMap((line) => {
    const match = heading.exec(line)
    return match === null ? [] : [match[1]!.length]
  })
  if (levels.length === 0) return { text, truncated: false }
  const cut = sectionsOf(lines, Math.min(...levels)).map((section) => cutSection(section, maxChars))
  return { text: cut.flatMap((section) => section.lines).join("\n"), truncated: cut.some((section) => section.cut) }
}

/**
 * A summary ready for pass 1.
 *
 * @since 0.0.0
 */
export interface MemorySummary {
  /** The summary with oversized sections cut. */
  readonly text: string
  readonly truncated: boolean
  /** The last entry it covers; none when it covers the whole view. */
  readonly lastSummarized: Option.Option<string>
}

/**
 * Checks and trims a summary's text: declines an empty or template-only
 * one, and cuts oversized sections. `path` names it in the reason.
 *
 * @since 0.0.0
 */
export const prepareSummary = (
  text: string,
  path: string,
  lastSummarized: Option.Option<string> = Option.none()
): Either.Either<MemorySummary, Declined> => {
  if (text.trim().length === 0) return Either.left(Declined.NoSummary({ path }))
  if (isTemplateOnly(text)) return Either.left(Declined.TemplateOnly({ path }))
  const cut = truncateSections(text.trim())
  return Either.right({ text: cut.text, truncated: cut.truncated, lastSummarized })
}

/**
 * The session's `summary.md`, checked and trimmed, with the point it covers
 * (`SummaryCoverage`, written by session memory after each update).
 *
 * @since 0.0.0
 */
export const readMemory = Effect.fn("SessionMemoryCompaction.readMemory")(function*(transcriptPath: string) {
  const fs = yield* FileSystem.FileSystem
  const path = summaryPath(transcriptPath)
  const text = yield* fs.readFileString(path).pipe(Effect.option)
  if (Option.isNone(text)) return Either.left(Declined.NoSummary({ path }))
  return prepareSummary(text.value, path, yield* SummaryCoverage.read(path))
})
