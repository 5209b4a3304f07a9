/**
 * One transcript line from raw bytes, and the byte markers the backward
 * scans look for. A marker is a JSON string as it appears on a line, so a
 * block holding none of them is never decoded.
 */
import type { Lenient } from "@skein/protocol"
import { Transcript } from "@skein/protocol"

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** Decodes one line leniently: an unknown or broken line is data, never a failure. */
export const decodeLine = (bytes: Uint8Array, line = 0): Lenient.Decoded<Transcript.Entry> =>
  Transcript.decoder.decodeLine(decoder.decode(bytes), line)

/** The bytes of `"text"`: a marker that matches a JSON string value or key. */
export const quoted = (text: string): Uint8Array => encoder.encode(`"${text}"`)
