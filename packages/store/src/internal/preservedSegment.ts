/**
 * The messages a compact boundary kept verbatim from before it
 * (`compactMetadata.preservedSegment` / `preservedMessages`). They are found
 * by a backward scan from the boundary, spliced in front of the tail with
 * their usage zeroed, and relinked: the segment's head hangs under the
 * anchor (the summary), the anchor's other children under the segment's tail.
 */
import type { PlatformError } from "@effect/platform/Error"
import type * as FileSystem from "@effect/platform/FileSystem"
import type { Anthropic } from "@skein/protocol"
import { Transcript } from "@skein/protocol"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Scan from "./backwardScan.js"
import type { View } from "./resumeTail.js"
import { decodeLine, quoted } from "./transcriptLine.js"

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

export type PreservedInfo = typeof PreservedInfo.Type

export const decodePreserved: (boundary: Transcript.SystemEntry) => Option.Option<PreservedInfo> = Schema
  .decodeUnknownOption(PreservedInfo)

const zeroUsage = (usage: Anthropic.Usage): Anthropic.Usage => ({
  ...usage,
  input_tokens: 0,
  output_tokens: 0,
  cache_creation_input_tokens: 0,
  cache_read_input_tokens: 0
})

export const withParent = (entry: Transcript.ChainEntry, parentUuid: string | null): Transcript.ChainEntry => ({
  ...entry,
  parentUuid
})

/** The uuids the boundary names that the tail does not hold already. */
export const wantedUuids = (info: PreservedInfo, tailUuids: ReadonlySet<string>): Set<string> => {
  const { preservedMessages, preservedSegment } = info.compactMetadata
  const wanted = new Set<string>([
    ...(preservedMessages?.allUuids ?? []),
    ...(preservedMessages?.uuids ?? []),
    ...(preservedSegment === undefined ? [] : [preservedSegment.headUuid, preservedSegment.tailUuid])
  ])
  for (const uuid of tailUuids) wanted.delete(uuid)
  return wanted
}

/** The chain entries named by `wanted` before `end`, last first; stops once all are found. */
export const findBefore = (
  file: FileSystem.File,
  wanted: ReadonlySet<string>,
  options: { readonly end: number; readonly blockSize: number; readonly maxLineBytes: number }
): Effect.Effect<{ readonly found: ReadonlyMap<string, Transcript.ChainEntry>; readonly bytesRead: number }, PlatformError> => {
  const found = new Map<string, Transcript.ChainEntry>()
  if (wanted.size === 0) return Effect.succeed({ found, bytesRead: 0 })
  return Effect.map(
    Scan.scanBackward(file, {
      ...options,
      markers: [...wanted].map(quoted),
      onLine: (line) => {
        const decoded = decodeLine(line.bytes)
        if (decoded._tag !== "Message" || !Transcript.isChainEntry(decoded.message)) return false
        const entry = decoded.message
        if (wanted.has(entry.uuid) && !found.has(entry.uuid)) found.set(entry.uuid, entry)
        return found.size === wanted.size
      }
    }),
    (scan) => ({ found, bytesRead: scan.bytesRead })
  )
}

/**
 * Splices the found entries (last first, as the scan met them) in front of
 * the view and relinks the segment. Reports what was not found. Returns the
 * uuids of the preserved entries, whose usage is not the view's.
 */
export const splice = (
  view: View,
  info: PreservedInfo,
  wanted: ReadonlySet<string>,
  found: ReadonlyMap<string, Transcript.ChainEntry>,
  tailUuids: ReadonlySet<string>
): ReadonlySet<string> => {
  const { entries, order, diagnostics } = view
  const { preservedSegment } = info.compactMetadata
  const missing = [...wanted].filter((uuid) => !found.has(uuid))
  if (missing.length > 0) diagnostics.push({ _tag: "PreservedMissing", uuids: missing })
  // Found last-first; the file order is the chain order of a segment.
  const segment = [...found.values()].reverse().map((entry): Transcript.ChainEntry =>
    entry.type === "assistant" ? { ...entry, message: { ...entry.message, usage: zeroUsage(entry.message.usage) } } : entry
  )
  for (const entry of segment) entries.set(entry.uuid, entry)
  order.unshift(...segment.map((entry) => entry.uuid))
  if (preservedSegment !== undefined && segment.length > 0 && entries.has(preservedSegment.anchorUuid)) {
    const { anchorUuid } = preservedSegment
    const head = entries.get(preservedSegment.headUuid) ?? segment[0]!
    const tail = entries.get(preservedSegment.tailUuid) ?? segment[segment.length - 1]!
    for (const uuid of tailUuids) {
      const entry = entries.get(uuid)!
      if (entry.parentUuid === anchorUuid && uuid !== head.uuid) {
        entries.set(uuid, withParent(entry, tail.uuid))
        diagnostics.push({ _tag: "Relinked", uuid, from: anchorUuid, to: tail.uuid, reason: "preservedSegment" })
      }
    }
    if (head.parentUuid !== anchorUuid) {
      entries.set(head.uuid, withParent(head, anchorUuid))
      diagnostics.push({ _tag: "Relinked", uuid: head.uuid, from: head.parentUuid, to: anchorUuid, reason: "preservedSegment" })
    }
  }
  return new Set(segment.map((entry) => entry.uuid))
}
