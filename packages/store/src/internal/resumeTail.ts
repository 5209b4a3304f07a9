/**
 * The part of a transcript a resumed CLI loads: from the last
 * `compact_boundary` line to the end. The boundary is found by a backward
 * scan that decodes only lines naming it; the bytes after it are decoded in
 * full into the view the later steps repair.
 */
import type { PlatformError } from "@effect/platform/Error"
import type * as FileSystem from "@effect/platform/FileSystem"
import { Lenient, Transcript } from "@skein/protocol"
import * as Effect from "effect/Effect"
import type { Diagnostic } from "../ResumeLoader.js"
import * as Scan from "./backwardScan.js"
import { emptyMetadata, applyMetadata, type MutableMetadata } from "./resumeMetadata.js"
import { decodeLine, quoted } from "./transcriptLine.js"

const BOUNDARY_MARKER = quoted("compact_boundary")

/** The chain entries loaded so far, by uuid, with their file order; repaired in place by the later steps. */
export interface View {
  readonly entries: Map<string, Transcript.ChainEntry>
  readonly order: Array<string>
  readonly diagnostics: Array<Diagnostic>
}

export interface Tail extends View {
  readonly metadata: MutableMetadata
  readonly unknownTypes: Record<string, number>
  /** The first boundary entry of the tail (the one the scan found), when there was one. */
  readonly boundary: Transcript.SystemEntry | undefined
  /** Of the last chain entry. */
  readonly sessionId: string | undefined
}

/** The offset of the last boundary line (-1 when there is none) and the bytes the scan read. */
export const lastBoundary = (
  file: FileSystem.File,
  options: { readonly end: number; readonly blockSize: number; readonly maxLineBytes: number }
): Effect.Effect<{ readonly offset: number; readonly bytesRead: number }, PlatformError> => {
  let offset = -1
  return Effect.map(
    Scan.scanBackward(file, {
      ...options,
      markers: [BOUNDARY_MARKER],
      onLine: (line) => {
        const decoded = decodeLine(line.bytes)
        if (decoded._tag === "Message" && Transcript.isCompactBoundary(decoded.message)) {
          offset = line.offset
          return true
        }
        return false
      }
    }),
    (scan) => ({ offset, bytesRead: scan.bytesRead })
  )
}

/**
 * Decodes the tail's bytes: chain entries of the wanted kind (main chain or
 * sidechain) into the view, metadata applied in order, unknown types counted,
 * bad lines kept as diagnostics. `hasBoundary` says the tail starts at one.
 */
export const decodeTail = (
  bytes: Uint8Array,
  options: { readonly maxLineBytes: number; readonly sidechain: boolean; readonly hasBoundary: boolean }
): Tail => {
  const entries = new Map<string, Transcript.ChainEntry>()
  const order: Array<string> = []
  const diagnostics: Array<Diagnostic> = []
  const metadata = emptyMetadata()
  const unknownTypes: Record<string, number> = {}
  let boundary: Transcript.SystemEntry | undefined
  let sessionId: string | undefined
  for (const decoded of Lenient.decodeAll(Transcript.decoder, bytes, { maxLineBytes: options.maxLineBytes })) {
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
    if (entry.isSidechain !== options.sidechain) continue
    if (boundary === undefined && options.hasBoundary && Transcript.isCompactBoundary(entry)) boundary = entry
    sessionId = entry.sessionId
    if (!entries.has(entry.uuid)) order.push(entry.uuid)
    entries.set(entry.uuid, entry)
  }
  return { entries, order, diagnostics, metadata, unknownTypes, boundary, sessionId }
}
