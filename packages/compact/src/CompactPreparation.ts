/**
 * What the summarizing pass does to the history before it asks for a
 * summary, as the CLI (2.1.332) does before its own `/compact`:
 *
 * - images and documents become the text placeholders `[image]` and
 *   `[document]`, in user content, inside tool results, and in file
 *   attachments (whose content becomes `[image]`, `[notebook]`, `[parts]`):
 *   a summary is text, and binary blocks are the largest part of a request;
 * - skill-discovery attachments (the skill listing the CLI re-announces) are
 *   stripped: they are re-sent after the boundary anyway, and would only
 *   cost the summary request tokens.
 *
 * It also reads what the boundary must carry forward: the deferred tools
 * the model had discovered (`preCompactDiscoveredTools`), so that a resumed
 * CLI still offers them.
 *
 * Pure: entries in, entries out.
 *
 * @since 0.0.0
 */
import type { Anthropic, Transcript } from "@skein/protocol"
import { Option, Schema } from "effect"

/**
 * Attachment types the pass strips before the summary request.
 *
 * @since 0.0.0
 */
export const skillDiscoveryAttachments: ReadonlySet<string> = new Set(["skill_listing", "skill_discovery"])

/** @since 0.0.0 */
export const imagePlaceholder: Anthropic.ContentBlock = { type: "text", text: "[image]" }
/** @since 0.0.0 */
export const documentPlaceholder: Anthropic.ContentBlock = { type: "text", text: "[document]" }

const placeholderOf = (block: { readonly type: string }): Anthropic.ContentBlock | undefined =>
  block.type === "image" ? imagePlaceholder : block.type === "document" ? documentPlaceholder : undefined

/** A tool result's content with its images and documents replaced; `undefined` when nothing changed. */
const toolResultContent = (block: Anthropic.ContentBlock): Anthropic.ContentBlock | undefined => {
  if (block.type !== "tool_result" || !("content" in block) || !Array.isArray(block.content)) return undefined
  const inner: ReadonlyArray<{ readonly type: string }> = block.content
  if (!inner.some((b) => placeholderOf(b) !== undefined)) return undefined
  return { ...block, content: inner.map((b) => placeholderOf(b) ?? b) }
}

/** The blocks with placeholders, or `undefined` when there was nothing to replace. */
const replaceBlocks = (blocks: ReadonlyArray<Anthropic.ContentBlock>): ReadonlyArray<Anthropic.ContentBlock> | undefined => {
  let changed = false
  const out = blocks.map((block) => {
    const next = placeholderOf(block) ?? toolResultContent(block)
    if (next === undefined) return block
    changed = true
    return next
  })
  return changed ? out : undefined
}

const FileAttachment = Schema.Struct({
  type: Schema.Literal("file"),
  filename: Schema.String,
  content: Schema.Struct({ type: Schema.String })
})
const decodeFileAttachment = Schema.decodeUnknownOption(FileAttachment)

/** The CLI keeps a file attachment's frame and replaces binary content by its kind. */
const binaryFileKinds: ReadonlySet<string> = new Set(["image", "notebook", "parts"])

const withPlaceholders = (entry: Transcript.ChainEntry): Transcript.ChainEntry | undefined => {
  switch (entry.type) {
    case "user": {
      const content = entry.message.content
      if (typeof content === "string") return undefined
      const blocks = replaceBlocks(content)
      return blocks === undefined ? undefined : { ...entry, message: { ...entry.message, content: blocks } }
    }
    case "attachment": {
      const file = decodeFileAttachment(entry.attachment)
      if (Option.isNone(file) || !binaryFileKinds.has(file.value.content.type)) return undefined
      const kind = file.value.content.type
      const attachment = {
        ...entry.attachment,
        content: {
          type: "text",
          file: { filePath: file.value.filename, content: `[${kind}]`, numLines: 1, startLine: 1, totalLines: 1 }
        }
      }
      return { ...entry, attachment }
    }
    default:
      return undefined
  }
}

/**
 * @since 0.0.0
 */
export interface Prepared {
  /** The chain, prepared; parent links are those of the input (a stripped entry leaves a gap a straight copy closes). */
  readonly entries: ReadonlyArray<Transcript.ChainEntry>
  /** Entries whose images or documents became placeholders. */
  readonly placeholders: number
  /** Skill-discovery attachments removed. */
  readonly stripped: number
}

/**
 * Prepares a chain for the summary request.
 *
 * @since 0.0.0
 */
export const prepare = (entries: ReadonlyArray<Transcript.ChainEntry>): Prepared => {
  let placeholders = 0
  let stripped = 0
  const out: Array<Transcript.ChainEntry> = []
  for (const entry of entries) {
    if (entry.type === "attachment" && skillDiscoveryAttachments.has(entry.attachment.type)) {
      stripped += 1
      continue
    }
    const next = withPlaceholders(entry)
    if (next !== undefined) placeholders += 1
    out.push(next ?? entry)
  }
  return { entries: out, placeholders, stripped }
}

/**
 * Whether preparing changed anything (then the summary request cannot share
 * the live session's cached prefix).
 *
 * @since 0.0.0
 */
export const changed = (prepared: Prepared): boolean => prepared.placeholders > 0 || prepared.stripped > 0

const DiscoveredBefore = Schema.Struct({
  compactMetadata: Schema.Struct({ preCompactDiscoveredTools: Schema.optional(Schema.Array(Schema.String)) })
})
const decodeDiscoveredBefore = Schema.decodeUnknownOption(DiscoveredBefore)

const ToolReference = Schema.Struct({ type: Schema.Literal("tool_reference"), tool_name: Schema.String })
const isToolReference = Schema.is(ToolReference)

/**
 * The deferred tools discovered before compaction: those a tool search
 * returned (`tool_reference` blocks in tool results) and those an earlier
 * boundary carried. Sorted; empty when there are none (the CLI then writes
 * no `preCompactDiscoveredTools`).
 *
 * @since 0.0.0
 */
export const discoveredTools = (
  entries: ReadonlyArray<Transcript.ChainEntry>,
  boundary: Option.Option<Transcript.SystemEntry>
): ReadonlyArray<string> => {
  const found = new Set<string>()
  const before = Option.flatMap(boundary, decodeDiscoveredBefore)
  if (Option.isSome(before)) for (const name of before.value.compactMetadata.preCompactDiscoveredTools ?? []) found.add(name)
  for (const entry of entries) {
    if (entry.type !== "user" || typeof entry.message.content === "string") continue
    for (const block of entry.message.content) {
      if (block.type !== "tool_result" || !("content" in block) || !Array.isArray(block.content)) continue
      const inner: ReadonlyArray<unknown> = block.content
      for (const item of inner) if (isToolReference(item)) found.add(item.tool_name)
    }
  }
  return [...found].sort()
}
