/**
 * Loads a transcript the way a resumed CLI sees it: the effective view after
 * the last `compact_boundary`, never the whole history.
 *
 * The boundary is found by reading the file backwards in blocks, and only the
 * bytes after it are decoded in full; the prefix is visited only for the
 * messages the boundary preserved and for metadata within a bounded window
 * before the boundary. Cost and memory follow the tail, not the file.
 *
 * Checked against the real CLI (2.1.332) and FakeModel's request log:
 * - the leaf is `last-prompt`'s `leafUuid`, extended to its newest
 *   descendant (a turn cut off after the last `last-prompt` is resumed);
 * - a boundary's `compactMetadata.preservedSegment` names messages from
 *   before the boundary that are kept verbatim: they follow the anchor (the
 *   summary) and the anchor's other children hang under the segment's tail;
 * - requests carry user and assistant entries in chain order, consecutive
 *   entries of one role merged into one message; attachments (even those
 *   with a `rendered` text) and system entries add no message;
 * - thinking blocks written by another model than the request's are
 *   dropped (their signatures do not carry over): see `Options.model`.
 */
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import type { Anthropic } from "@skein/protocol"
import { Lenient, Transcript } from "@skein/protocol"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Scan from "./internal/backwardScan.js"
import * as Jsonl from "./internal/jsonlFile.js"

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/** The transcript file does not exist. */
export class TranscriptNotFound extends Schema.TaggedError<TranscriptNotFound>()("TranscriptNotFound", {
  path: Schema.String
}) {}

/** The transcript exists but could not be read. */
export class TranscriptReadError extends Schema.TaggedError<TranscriptReadError>()("TranscriptReadError", {
  path: Schema.String,
  message: Schema.String
}) {}

/** `resumeAt` names a message that is not in the loaded view (unknown, sidechain, or before the boundary). */
export class ResumeAtNotFound extends Schema.TaggedError<ResumeAtNotFound>()("ResumeAtNotFound", {
  path: Schema.String,
  uuid: Schema.String
}) {}

export type LoadError = TranscriptNotFound | TranscriptReadError | ResumeAtNotFound

// ---------------------------------------------------------------------------
// Result
// ---------------------------------------------------------------------------

/** What the loader noticed and repaired; loading never fails on these. */
export type Diagnostic =
  | Lenient.Diagnostic
  /** An entry whose parent is not in the view: it became the root. */
  | { readonly _tag: "Orphan"; readonly uuid: string; readonly parentUuid: string }
  /** The parent chain came back to `uuid`; the walk stopped there. */
  | { readonly _tag: "Cycle"; readonly uuid: string }
  /** `last-prompt` named a leaf that is not in the view; the last chain entry was used. */
  | { readonly _tag: "LeafNotFound"; readonly leafUuid: string }
  /** Messages the boundary preserved that were not found before it. */
  | { readonly _tag: "PreservedMissing"; readonly uuids: ReadonlyArray<string> }
  /** A parent link was rewritten. */
  | {
    readonly _tag: "Relinked"
    readonly uuid: string
    readonly from: string | null
    readonly to: string
    readonly reason: "logicalParent" | "preservedSegment"
  }

/** Latest metadata: entries in the tail win over those found before the boundary. */
export interface Metadata {
  readonly customTitle: string | undefined
  readonly aiTitle: string | undefined
  readonly tag: string | undefined
  readonly mode: string | undefined
  readonly agentName: string | undefined
  readonly lastPrompt: string | undefined
  readonly leafUuid: string | undefined
  readonly costState: Transcript.CostState | undefined
}

/** Token counts of the assistant messages in the view that were produced after the boundary. */
export interface Usage {
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cache_creation_input_tokens: number
  readonly cache_read_input_tokens: number
}

export interface Conversation {
  readonly path: string
  readonly sessionId: string | undefined
  /** The last compact boundary; the view starts with it. */
  readonly boundary: Option.Option<Transcript.SystemEntry>
  /** The chain from root to leaf, relinked; no sidechain entries. */
  readonly entries: ReadonlyArray<Transcript.ChainEntry>
  /** What a resumed CLI sends as the history before the next prompt. */
  readonly messages: ReadonlyArray<Anthropic.MessageParam>
  readonly leafUuid: string | undefined
  readonly metadata: Metadata
  readonly usage: Usage
  readonly diagnostics: ReadonlyArray<Diagnostic>
  /** Entries of types this decoder does not know, by type (kept out of the view). */
  readonly unknownTypes: Readonly<Record<string, number>>
  readonly stats: {
    readonly fileBytes: number
    /** Where the decoded tail starts (the boundary line, or 0). */
    readonly tailOffset: number
    /** Bytes read by backward scans (boundary, preserved messages, metadata window). */
    readonly scannedBytes: number
  }
}

export interface Options {
  /** Truncate the view at this message (it becomes the leaf). */
  readonly resumeAt?: string | undefined
  /** Block size of the backward scans; default 256 KiB. */
  readonly blockSize?: number | undefined
  /** How far before the boundary to look for metadata; default 1 MiB. */
  readonly metadataWindow?: number | undefined
  /** Longest line considered; default 64 MiB. */
  readonly maxLineBytes?: number | undefined
  /**
   * The model the resumed session will use. The CLI sends thinking blocks
   * only of assistant messages that model wrote; with this set, `messages`
   * drops the others too. `entries` always keep them.
   */
  readonly model?: string | undefined
  /** Load a subagent transcript, whose entries are all sidechain entries; by default those are skipped. */
  readonly sidechain?: boolean | undefined
}

export const title = (metadata: Metadata): string | undefined => metadata.customTitle ?? metadata.aiTitle

// ---------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------

const encoder = new TextEncoder()
const decoder = new TextDecoder()
const BOUNDARY_MARKER = encoder.encode("\"compact_boundary\"")
const METADATA_TYPES = ["custom-title", "ai-title", "tag", "mode", "agent-name", "last-prompt", "cost-state"] as const
const METADATA_MARKERS = METADATA_TYPES.map((type) => encoder.encode(`"${type}"`))

const PreservedInfo = Schema.Struct({
  compactMetadata: Schema.Struct({
    preservedSegment: Schema.optional(Schema.Struct({
      headUuid: Schema.String,
      anchorUuid: Schema.String,
      tailUuid: Schema.String
    })),
    preservedMessages: Schema.optional(Schema.Struct({
      uuids: Schema.optional(Schema.Array(Schema.String)),
      allUuids: Schema.optional(Schema.Array(Schema.String))
    }))
  })
})
const decodePreserved = Schema.decodeUnknownOption(PreservedInfo)

const decodeLine = (bytes: Uint8Array, line = 0): Lenient.Decoded<Transcript.Entry> =>
  Transcript.decoder.decodeLine(decoder.decode(bytes), line)

type MutableMetadata = { -readonly [K in keyof Metadata]: Metadata[K] }

const emptyMetadata = (): MutableMetadata => ({
  customTitle: undefined,
  aiTitle: undefined,
  tag: undefined,
  mode: undefined,
  agentName: undefined,
  lastPrompt: undefined,
  leafUuid: undefined,
  costState: undefined
})

/** Records a metadata entry; with `onlyMissing`, never overwrites (a backward scan sees the latest first). */
const applyMetadata = (metadata: MutableMetadata, entry: Transcript.Entry, onlyMissing: boolean): void => {
  const set = <K extends keyof MutableMetadata>(key: K, value: MutableMetadata[K]) => {
    if (!onlyMissing || metadata[key] === undefined) metadata[key] = value
  }
  switch (entry.type) {
    case "custom-title":
      return set("customTitle", entry.customTitle)
    case "ai-title":
      return set("aiTitle", entry.aiTitle)
    case "tag":
      return set("tag", entry.tag)
    case "mode":
      return set("mode", entry.mode)
    case "agent-name":
      return set("agentName", entry.agentName)
    case "cost-state":
      return set("costState", entry)
    case "last-prompt":
      if (!onlyMissing || metadata.lastPrompt === undefined) {
        metadata.lastPrompt = entry.lastPrompt
        metadata.leafUuid = entry.leafUuid
      }
      return
  }
}

const zeroUsage = (usage: Anthropic.Usage): Anthropic.Usage => ({
  ...usage,
  input_tokens: 0,
  output_tokens: 0,
  cache_creation_input_tokens: 0,
  cache_read_input_tokens: 0
})

const withParent = (entry: Transcript.ChainEntry, parentUuid: string | null): Transcript.ChainEntry => ({
  ...entry,
  parentUuid
})

const asUserBlocks = (content: Anthropic.MessageParam["content"]): Array<Anthropic.ContentBlock> =>
  typeof content === "string" ? [{ type: "text", text: content }] : [...content]

const isThinking = (block: Anthropic.ContentBlock): boolean =>
  block.type === "thinking" || block.type === "redacted_thinking"

/** The messages one chain entry contributes to a request. */
const contribution = (entry: Transcript.ChainEntry, model: string | undefined): Option.Option<Anthropic.MessageParam> => {
  switch (entry.type) {
    case "user":
      return Option.some({ role: "user", content: entry.message.content })
    case "assistant": {
      if (model === undefined || entry.message.model === model) {
        return Option.some({ role: "assistant", content: entry.message.content })
      }
      const content = entry.message.content.filter((block) => !isThinking(block))
      return content.length === 0 ? Option.none() : Option.some({ role: "assistant", content })
    }
    case "attachment":
    case "system":
      return Option.none()
  }
}

/**
 * Merges consecutive messages of one role, as the CLI does before a request.
 * A user text block followed by more user content gets a trailing newline.
 */
export const toMessages = (
  entries: ReadonlyArray<Transcript.ChainEntry>,
  options: { readonly model?: string | undefined } = {}
): ReadonlyArray<Anthropic.MessageParam> => {
  const out: Array<Anthropic.MessageParam> = []
  for (const entry of entries) {
    const next = contribution(entry, options.model)
    if (Option.isNone(next)) continue
    const last = out[out.length - 1]
    if (last === undefined || last.role !== next.value.role) {
      out.push(next.value)
      continue
    }
    const previous = asUserBlocks(last.content)
    if (last.role === "user") {
      const tail = previous[previous.length - 1]
      if (tail !== undefined && tail.type === "text" && "text" in tail && !tail.text.endsWith("\n")) {
        previous[previous.length - 1] = { ...tail, text: `${tail.text}\n` }
      }
    }
    out[out.length - 1] = { role: last.role, content: [...previous, ...asUserBlocks(next.value.content)] }
  }
  return out
}

const mapReadError = (path: string) => (error: PlatformError): TranscriptNotFound | TranscriptReadError =>
  error._tag === "SystemError" && error.reason === "NotFound"
    ? new TranscriptNotFound({ path })
    : new TranscriptReadError({ path, message: error.message })

/** Loads the effective conversation of the transcript at `path`. */
export const load: (
  path: string,
  options?: Options
) => Effect.Effect<Conversation, LoadError, FileSystem.FileSystem> = Effect.fn("ResumeLoader.load")(
  function*(path: string, options: Options = {}) {
    const fs = yield* FileSystem.FileSystem
    return yield* Effect.scoped(
      Effect.gen(function*() {
        const file = yield* fs.open(path, { flag: "r" })
        const size = Number((yield* file.stat).size)
        return yield* loadFile(file, path, size, options)
      })
    ).pipe(Effect.catchTags({ BadArgument: (e) => Effect.fail(mapReadError(path)(e)), SystemError: (e) => Effect.fail(mapReadError(path)(e)) }))
  }
)

const loadFile = (file: FileSystem.File, path: string, size: number, options: Options) =>
  Effect.gen(function*() {
    const blockSize = options.blockSize ?? 256 * 1024
    const maxLineBytes = options.maxLineBytes ?? 64 * 1024 * 1024
    let scannedBytes = 0
    const diagnostics: Array<Diagnostic> = []

    // 1. The last boundary, scanning backwards.
    let boundaryOffset = -1
    const boundaryScan = yield* Scan.scanBackward(file, {
      end: size,
      blockSize,
      maxLineBytes,
      markers: [BOUNDARY_MARKER],
      onLine: (line) => {
        const decoded = decodeLine(line.bytes)
        if (decoded._tag === "Message" && Transcript.isCompactBoundary(decoded.message)) {
          boundaryOffset = line.offset
          return true
        }
        return false
      }
    })
    scannedBytes += boundaryScan.bytesRead
    const tailOffset = Math.max(0, boundaryOffset)

    // 2. Decode the tail in full.
    const tailBytes = yield* Jsonl.readAt(file, tailOffset, size - tailOffset)
    const entries = new Map<string, Transcript.ChainEntry>()
    const order: Array<string> = []
    const metadata = emptyMetadata()
    const unknownTypes: Record<string, number> = {}
    let boundary: Transcript.SystemEntry | undefined
    let sessionId: string | undefined
    for (const decoded of Lenient.decodeAll(Transcript.decoder, tailBytes, { maxLineBytes })) {
      if (decoded._tag === "Unknown") {
        const type = decoded.type ?? "(none)"
        unknownTypes[type] = (unknownTypes[type] ?? 0) + 1
        continue
      }
      if (decoded._tag !== "Message") {
        diagnostics.push(decoded)
        continue
      }
      const entry = decoded.message
      if (!Transcript.isChainEntry(entry)) {
        applyMetadata(metadata, entry, false)
        continue
      }
      if (entry.isSidechain !== (options.sidechain ?? false)) continue
      if (boundary === undefined && boundaryOffset >= 0 && Transcript.isCompactBoundary(entry)) boundary = entry
      sessionId = entry.sessionId
      if (!entries.has(entry.uuid)) order.push(entry.uuid)
      entries.set(entry.uuid, entry)
    }

    // 3. Messages the boundary kept verbatim, found just before it.
    const preserved = boundary === undefined ? Option.none() : decodePreserved(boundary)
    const tailUuids = new Set(entries.keys())
    let preservedUuids = new Set<string>()
    if (Option.isSome(preserved) && boundaryOffset > 0) {
      const { preservedMessages, preservedSegment } = preserved.value.compactMetadata
      const wanted = new Set<string>([
        ...(preservedMessages?.allUuids ?? []),
        ...(preservedMessages?.uuids ?? []),
        ...(preservedSegment === undefined ? [] : [preservedSegment.headUuid, preservedSegment.tailUuid])
      ])
      for (const uuid of tailUuids) wanted.delete(uuid)
      const found = new Map<string, Transcript.ChainEntry>()
      if (wanted.size > 0) {
        const scan = yield* Scan.scanBackward(file, {
          end: boundaryOffset,
          blockSize,
          maxLineBytes,
          markers: [...wanted].map((uuid) => encoder.encode(`"${uuid}"`)),
          onLine: (line) => {
            const decoded = decodeLine(line.bytes)
            if (decoded._tag !== "Message" || !Transcript.isChainEntry(decoded.message)) return false
            const entry = decoded.message
            if (wanted.has(entry.uuid) && !found.has(entry.uuid)) found.set(entry.uuid, entry)
            return found.size === wanted.size
          }
        })
        scannedBytes += scan.bytesRead
      }
      const missing = [...wanted].filter((uuid) => !found.has(uuid))
      if (missing.length > 0) diagnostics.push({ _tag: "PreservedMissing", uuids: missing })
      // Found last-first; the file order is the chain order of a segment.
      const segment = [...found.values()].reverse().map((entry): Transcript.ChainEntry =>
        entry.type === "assistant" ? { ...entry, message: { ...entry.message, usage: zeroUsage(entry.message.usage) } } : entry
      )
      preservedUuids = new Set(segment.map((entry) => entry.uuid))
      for (const entry of segment) entries.set(entry.uuid, entry)
      order.unshift(...segment.map((entry) => entry.uuid))
      if (preservedSegment !== undefined && segment.length > 0) {
        const { anchorUuid } = preservedSegment
        const head = entries.get(preservedSegment.headUuid) ?? segment[0]!
        const tail = entries.get(preservedSegment.tailUuid) ?? segment[segment.length - 1]!
        if (entries.has(anchorUuid)) {
          for (const uuid of tailUuids) {
            const entry = entries.get(uuid)!
            if (entry.parentUuid === anchorUuid && uuid !== head.uuid) {
              entries.set(uuid, withParent(entry, tail.uuid))
              diagnostics.push({ _tag: "Relinked", uuid, from: anchorUuid, to: tail.uuid, reason: "preservedSegment" })
            }
          }
          if (head.parentUuid !== anchorUuid) {
            entries.set(head.uuid, withParent(head, anchorUuid))
            diagnostics.push({
              _tag: "Relinked",
              uuid: head.uuid,
              from: head.parentUuid,
              to: anchorUuid,
              reason: "preservedSegment"
            })
          }
        }
      }
    }

    // 4. Entries cut from their parent (null or missing) whose logical parent is loaded.
    for (const uuid of tailUuids) {
      const entry = entries.get(uuid)!
      if (entry === boundary) continue
      const logical = entry.logicalParentUuid
      if (logical === undefined || logical === null || !entries.has(logical) || logical === uuid) continue
      if (entry.parentUuid === null || !entries.has(entry.parentUuid)) {
        entries.set(uuid, withParent(entry, logical))
        diagnostics.push({ _tag: "Relinked", uuid, from: entry.parentUuid, to: logical, reason: "logicalParent" })
      }
    }

    // 5. Metadata before the boundary, within a window; the tail's own entries win.
    if (boundaryOffset > 0) {
      const scan = yield* Scan.scanBackward(file, {
        end: boundaryOffset,
        blockSize,
        maxLineBytes,
        limitBytes: options.metadataWindow ?? 1024 * 1024,
        markers: METADATA_MARKERS,
        onLine: (line) => {
          const decoded = decodeLine(line.bytes)
          if (decoded._tag === "Message" && !Transcript.isChainEntry(decoded.message)) {
            applyMetadata(metadata, decoded.message, true)
          }
          return false
        }
      })
      scannedBytes += scan.bytesRead
    }

    // 6. The leaf.
    let leaf: string | undefined
    if (options.resumeAt !== undefined) {
      if (!entries.has(options.resumeAt)) return yield* new ResumeAtNotFound({ path, uuid: options.resumeAt })
      leaf = options.resumeAt
    } else {
      if (metadata.leafUuid !== undefined && entries.has(metadata.leafUuid)) {
        leaf = newestDescendant(metadata.leafUuid, entries, order)
      } else {
        if (metadata.leafUuid !== undefined) diagnostics.push({ _tag: "LeafNotFound", leafUuid: metadata.leafUuid })
        leaf = order[order.length - 1]
      }
    }

    // 7. Walk the parent chain back from the leaf.
    const chain: Array<Transcript.ChainEntry> = []
    const seen = new Set<string>()
    let current = leaf === undefined ? undefined : entries.get(leaf)
    while (current !== undefined) {
      if (seen.has(current.uuid)) {
        diagnostics.push({ _tag: "Cycle", uuid: current.uuid })
        break
      }
      seen.add(current.uuid)
      chain.push(current)
      const parent = current.parentUuid
      if (parent === null) break
      const next = entries.get(parent)
      if (next === undefined) {
        diagnostics.push({ _tag: "Orphan", uuid: current.uuid, parentUuid: parent })
        break
      }
      current = next
    }
    chain.reverse()

    // 8. Usage of the view, counting each API message once; preserved messages count none.
    const usage = { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
    const counted = new Set<string>()
    for (const entry of chain) {
      if (entry.type !== "assistant" || preservedUuids.has(entry.uuid) || counted.has(entry.message.id)) continue
      counted.add(entry.message.id)
      const u = entry.message.usage
      usage.input_tokens += u.input_tokens
      usage.output_tokens += u.output_tokens
      usage.cache_creation_input_tokens += u.cache_creation_input_tokens ?? 0
      usage.cache_read_input_tokens += u.cache_read_input_tokens ?? 0
    }

    return {
      path,
      sessionId,
      boundary: Option.fromNullable(boundary),
      entries: chain,
      messages: toMessages(chain, { model: options.model }),
      leafUuid: leaf,
      metadata,
      usage,
      diagnostics,
      unknownTypes,
      stats: { fileBytes: size, tailOffset, scannedBytes }
    } satisfies Conversation
  })

/** Follows the newest child (in file order) down from `uuid`, so a turn written after `last-prompt` is kept. */
const newestDescendant = (
  uuid: string,
  entries: ReadonlyMap<string, Transcript.ChainEntry>,
  order: ReadonlyArray<string>
): string => {
  const newestChild = new Map<string, string>()
  for (const id of order) {
    const parent = entries.get(id)?.parentUuid
    if (parent !== null && parent !== undefined) newestChild.set(parent, id)
  }
  const seen = new Set<string>([uuid])
  let current = uuid
  for (let child = newestChild.get(current); child !== undefined && !seen.has(child); child = newestChild.get(current)) {
    seen.add(child)
    current = child
  }
  return current
}
