import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Stream } from "effect"
import { CliMessage, Lenient, StreamJson } from "@skein/protocol"
import { fixtureLines } from "./fixtures.js"
import { cliSamples } from "./samples.js"

/** A small seeded generator: the fuzz run is the same on every machine. */
const prng = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

/** Effect's ParseResult verdict on a message of a known type: "valid", or the issue. */
const explain = (message: CliMessage.CliMessage): string => {
  const variant = CliMessage.decoder.variants[message.type]!
  if (variant._tag === "Schema") return variant.check.explain(message)
  const subtype = variant.subtypeOf({ ...message })
  return typeof subtype === "string" ? variant.subtypes[subtype]!.explain(message) : "no subtype"
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

describe("fuzz", () => {
  it.effect("100,000 mutated lines never throw and each is one message or one diagnostic", () =>
    Effect.gen(function*() {
      const random = prng(20261130)
      const int = (n: number) => Math.floor(random() * n)
      const base = [...cliSamples.map((s) => JSON.stringify(s)), ...fixtureLines()].map((l) => encoder.encode(l))
      const count = 100_000
      const lines: Array<Uint8Array> = []
      for (let i = 0; i < count; i++) {
        let bytes = base[int(base.length)]!.slice()
        switch (int(5)) {
          case 0: // truncated
            bytes = bytes.slice(0, 1 + int(bytes.length))
            break
          case 1: // bit flips
            for (let k = 0, n = 1 + int(4); k < n; k++) bytes[int(bytes.length)]! ^= 1 << int(8)
            break
          case 2: { // spliced
            const other = base[int(base.length)]!
            const head = bytes.subarray(0, int(bytes.length))
            const tail = other.subarray(int(other.length))
            bytes = new Uint8Array(head.length + tail.length)
            bytes.set(head)
            bytes.set(tail, head.length)
            break
          }
          case 3: { // unknown type or subtype
            const json: unknown = JSON.parse(decoder.decode(bytes))
            const key = random() < 0.5 ? "type" : "subtype"
            bytes = encoder.encode(JSON.stringify({ ...(json as object), [key]: `new_kind_${int(1000)}` }))
            break
          }
          default: // intact
            break
        }
        for (let k = 0; k < bytes.length; k++) if (bytes[k] === 0x0a) bytes[k] = 0x20
        if (decoder.decode(bytes).replace(/[\s\uFEFF]/g, "").length === 0) bytes = encoder.encode("#")
        lines.push(bytes)
      }
      const whole = new Uint8Array(lines.reduce((n, l) => n + l.length + 1, 0))
      let offset = 0
      for (const l of lines) {
        whole.set(l, offset)
        whole[offset + l.length] = 0x0a
        offset += l.length + 1
      }
      const chunks: Array<Uint8Array> = []
      for (let at = 0; at < whole.length;) {
        const size = 1 + int(8192)
        chunks.push(whole.subarray(at, at + size))
        at += size
      }
      const decoded = Chunk.toReadonlyArray(
        yield* StreamJson.decodeStdout(Stream.fromIterable(chunks)).pipe(Stream.runCollect)
      )
      expect(decoded.length).toBe(count)
      expect(decoded.map((d) => d.line)).toEqual(Array.from({ length: count }, (_, i) => i + 1))
      const tally: Record<string, number> = {}
      for (const d of decoded) tally[d._tag] = (tally[d._tag] ?? 0) + 1
      // Every kind of outcome occurs, and the intact fifth decodes as messages.
      expect(tally["Message"]).toBeGreaterThan(count / 5)
      expect(tally["Unknown"]).toBeGreaterThan(0)
      expect(tally["Malformed"]).toBeGreaterThan(0)
      expect(tally["Unparseable"]).toBeGreaterThan(0)
      // Diagnostics keep the raw line, so nothing is lost.
      for (const d of decoded) {
        if (d._tag === "Malformed" || d._tag === "Unparseable") {
          expect(d.raw).toBe(decoder.decode(lines[d.line - 1]!).replace(/\r$/, ""))
        }
      }
      expect(decoded.every((d) => d._tag === "Message" || d._tag === "Unknown" || Lenient.isDiagnostic(d))).toBe(true)
      // The compiled guards agree with Effect's own ParseResult on every verdict.
      for (const d of decoded) {
        if (d._tag === "Malformed") expect(d.issue).not.toBe("valid")
        if (d._tag === "Message") expect(explain(d.message)).toBe("valid")
      }
      // Each line also decodes the same on its own.
      for (let i = 0; i < 2000; i++) {
        const at = int(count)
        const alone = CliMessage.decodeLine(decoder.decode(lines[at]!).replace(/\r$/, ""), at + 1)
        expect(alone).toEqual(decoded[at])
      }
    }), { timeout: 120_000 })
})
