/**
 * The metadata entries of a transcript where the last one wins (titles,
 * tag, mode, agent name, last prompt, cost state). The tail's entries are
 * applied in file order; the window before the boundary is scanned
 * backwards and only fills what the tail left unset.
 */
import type { PlatformError } from "@effect/platform/Error"
import type * as FileSystem from "@effect/platform/FileSystem"
import { Transcript } from "@skein/protocol"
import * as Effect from "effect/Effect"
import type { Metadata } from "../ResumeLoader.js"
import * as Scan from "./backwardScan.js"
import { decodeLine, quoted } from "./transcriptLine.js"

export type MutableMetadata = { -readonly [K in keyof Metadata]: Metadata[K] }

const METADATA_TYPES = ["custom-title", "ai-title", "tag", "mode", "agent-name", "last-prompt", "cost-state"] as const
const METADATA_MARKERS = METADATA_TYPES.map(quoted)

export const emptyMetadata = (): MutableMetadata => ({
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
export const applyMetadata = (metadata: MutableMetadata, entry: Transcript.Entry, onlyMissing: boolean): void => {
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

/**
 * Fills what `metadata` lacks from the `limitBytes` before `end`, reading
 * only lines that name a metadata type. Returns the bytes read.
 */
export const scanMetadataBefore = (
  file: FileSystem.File,
  metadata: MutableMetadata,
  options: {
    readonly end: number
    readonly blockSize: number
    readonly maxLineBytes: number
    readonly limitBytes: number
  }
): Effect.Effect<number, PlatformError> =>
  Effect.map(
    Scan.scanBackward(file, {
      ...options,
      markers: METADATA_MARKERS,
      onLine: (line) => {
        const decoded = decodeLine(line.bytes)
        if (decoded._tag === "Message" && !Transcript.isChainEntry(decoded.message)) {
          applyMetadata(metadata, decoded.message, true)
        }
        return false
      }
    }),
    (scan) => scan.bytesRead
  )
