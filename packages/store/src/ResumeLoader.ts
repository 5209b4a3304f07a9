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
import * as Jsonl from "./internal/jsonlFile.js"
import * as Preserved from "./internal/preservedSegment.js"
import * as Chain from "./internal/resumeChain.js"
import * as ResumeMetadata from "./internal/resumeMetadata.js"
import * as Tail from "./internal/resumeTail.js"

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

/**
 * The steps, in order: find the last boundary; decode the tail after it;
 * splice in what the boundary preserved; relink entries cut from their
 * parent; fill metadata from a window before the boundary; choose the leaf;
 * walk the chain back from it; count its usage.
 */
const loadFile = (file: FileSystem.File, path: string, size: number, options: Options) =>
  Effect.gen(function*() {
    const blockSize = options.blockSize ?? 256 * 1024
    const maxLineBytes = options.maxLineBytes ?? 64 * 1024 * 1024
    const found = yield* Tail.lastBoundary(file, { end: size, blockSize, maxLineBytes })
    const boundaryOffset = found.offset
    let scannedBytes = found.bytesRead
    const tailOffset = Math.max(0, boundaryOffset)

    const tailBytes = yield* Jsonl.readAt(file, tailOffset, size - tailOffset)
    const view = Tail.decodeTail(tailBytes, {
      maxLineBytes,
      sidechain: options.sidechain ?? false,
      hasBoundary: boundaryOffset >= 0
    })
    const { boundary, metadata } = view
    const tailUuids = new Set(view.entries.keys())

    let preservedUuids: ReadonlySet<string> = new Set()
    const preserved = boundary === undefined ? Option.none() : Preserved.decodePreserved(boundary)
    if (Option.isSome(preserved) && boundaryOffset > 0) {
      const wanted = Preserved.wantedUuids(preserved.value, tailUuids)
      const scan = yield* Preserved.findBefore(file, wanted, { end: boundaryOffset, blockSize, maxLineBytes })
      scannedBytes += scan.bytesRead
      preservedUuids = Preserved.splice(view, preserved.value, wanted, scan.found, tailUuids)
    }

    Chain.relinkLogicalParents(view, tailUuids, boundary)

    if (boundaryOffset > 0) {
      scannedBytes += yield* ResumeMetadata.scanMetadataBefore(file, metadata, {
        end: boundaryOffset,
        blockSize,
        maxLineBytes,
        limitBytes: options.metadataWindow ?? 1024 * 1024
      })
    }

    if (options.resumeAt !== undefined && !view.entries.has(options.resumeAt)) {
      return yield* new ResumeAtNotFound({ path, uuid: options.resumeAt })
    }
    const leaf = options.resumeAt ?? Chain.defaultLeaf(view, metadata.leafUuid)
    const chain = Chain.recoverSiblingToolResults(view, Chain.walkChain(view, leaf))

    return {
      path,
      sessionId: view.sessionId,
      boundary: Option.fromNullable(boundary),
      entries: chain,
      messages: toMessages(chain, { model: options.model }),
      leafUuid: leaf,
      metadata,
      usage: Chain.chainUsage(chain, preservedUuids),
      diagnostics: view.diagnostics,
      unknownTypes: view.unknownTypes,
      stats: { fileBytes: size, tailOffset, scannedBytes }
    } satisfies Conversation
  })
