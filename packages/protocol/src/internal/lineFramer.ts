/**
 * Byte-level NDJSON line framer.
 *
 * Framing happens on bytes, not text: `\n` (0x0A) never occurs inside a
 * multi-byte UTF-8 sequence, so a character split across chunks is decoded only
 * once its line is complete. A line longer than `maxLineBytes` is never
 * buffered: the framer drops it, counts its bytes, and resyncs at the next
 * newline.
 */
import type * as Ndjson from "../Ndjson.js"

const LF = 0x0a
const CR = 0x0d

const decoder = new TextDecoder("utf-8")

const isBlank = (text: string): boolean => {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c !== 0x20 && c !== 0x09 && c !== 0x0d && c !== 0x0b && c !== 0x0c && c !== 0xfeff) return false
  }
  return true
}

export class LineFramer {
  private parts: Array<Uint8Array> = []
  private size = 0
  /** Bytes of an oversized line seen so far, or -1 when not skipping. */
  private skipped = -1
  private line = 0

  constructor(readonly maxLineBytes: number) {}

  push(chunk: Uint8Array, out: Array<Ndjson.Frame>): void {
    let start = 0
    while (start < chunk.length) {
      const nl = chunk.indexOf(LF, start)
      const end = nl === -1 ? chunk.length : nl
      const piece = chunk.subarray(start, end)
      if (this.skipped >= 0) {
        this.skipped += piece.length
      } else if (this.size + piece.length > this.maxLineBytes) {
        this.skipped = this.size + piece.length
        this.parts = []
        this.size = 0
      } else if (nl !== -1 && this.size === 0) {
        // Fast path: the whole line lies inside this chunk, no copy needed.
        this.emit(piece, out)
        start = nl + 1
        continue
      } else if (piece.length > 0) {
        // Copy: the caller may reuse its buffer after push returns.
        this.parts.push(piece.slice())
        this.size += piece.length
      }
      if (nl === -1) return
      this.completeLine(out)
      start = nl + 1
    }
  }

  end(out: Array<Ndjson.Frame>): void {
    if (this.skipped >= 0 || this.size > 0) this.completeLine(out)
  }

  private completeLine(out: Array<Ndjson.Frame>): void {
    if (this.skipped >= 0) {
      this.line++
      out.push({ _tag: "Oversized", line: this.line, bytes: this.skipped, limit: this.maxLineBytes })
      this.skipped = -1
      return
    }
    const bytes = this.parts.length === 1 ? this.parts[0]! : concat(this.parts, this.size)
    this.parts = []
    this.size = 0
    this.emit(bytes, out)
  }

  private emit(bytes: Uint8Array, out: Array<Ndjson.Frame>): void {
    this.line++
    const length = bytes.length > 0 && bytes[bytes.length - 1] === CR ? bytes.length - 1 : bytes.length
    if (length === 0) return
    const text = decoder.decode(length === bytes.length ? bytes : bytes.subarray(0, length))
    if (isBlank(text)) return
    out.push({ _tag: "Line", line: this.line, text })
  }
}

const concat = (parts: ReadonlyArray<Uint8Array>, size: number): Uint8Array => {
  const bytes = new Uint8Array(size)
  let offset = 0
  for (const part of parts) {
    bytes.set(part, offset)
    offset += part.length
  }
  return bytes
}
