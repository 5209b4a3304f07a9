/**
 * A fixed-size byte ring: the last `capacity` bytes written to it. Keeps a
 * child's stderr tail at a constant cost however much the child prints. The
 * buffer is allocated at the first write: most children never print to
 * stderr, and a thousand idle sessions need not hold 8 MB of empty tails.
 */
export class ByteRing {
  private buffer: Uint8Array | undefined
  private start = 0
  private length = 0
  constructor(readonly capacity: number) {}
  push(bytes: Uint8Array): void {
    if (bytes.length === 0) return
    const buffer = (this.buffer ??= new Uint8Array(this.capacity))
    const src = bytes.length > this.capacity ? bytes.subarray(bytes.length - this.capacity) : bytes
    for (let i = 0; i < src.length; i++) {
      buffer[(this.start + this.length) % this.capacity] = src[i]!
      if (this.length < this.capacity) this.length++
      else this.start = (this.start + 1) % this.capacity
    }
  }
  bytes(): Uint8Array {
    const out = new Uint8Array(this.length)
    const buffer = this.buffer
    if (buffer === undefined) return out
    for (let i = 0; i < this.length; i++) out[i] = buffer[(this.start + i) % this.capacity]!
    return out
  }
  /** UTF-8 text, without a character the cut at the front split. */
  text(): string {
    const bytes = this.bytes()
    let from = 0
    if (this.length === this.capacity) {
      while (from < bytes.length && from < 4 && (bytes[from]! & 0xc0) === 0x80) from++
    }
    return new TextDecoder().decode(bytes.subarray(from))
  }
}
