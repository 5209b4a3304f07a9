/**
 * The incremental decoder a pulling reader feeds: the same messages and
 * diagnostics as decoding the whole input at once, however the bytes arrive.
 */
import { describe, expect, it } from "@effect/vitest"
import { CliMessage, Lenient, StreamJson } from "@skein/protocol"
import { FastCheck } from "effect"
import * as fs from "node:fs"
import { fixtureFiles } from "./fixtures.js"
import { splitAt } from "./cuts.js"

const encoder = new TextEncoder()

const incrementally = (chunks: ReadonlyArray<Uint8Array>, options?: { readonly maxLineBytes?: number }) => {
  const decoder = StreamJson.stdoutDecoder(options)
  return [...chunks.flatMap((chunk) => decoder.push(chunk)), ...decoder.end()]
}

describe("Lenient.incremental", () => {
  it("decodes a real capture, cut anywhere, as decodeAll decodes it whole", () => {
    const bytes = new Uint8Array(fs.readFileSync(fixtureFiles()[0]!))
    const whole = Lenient.decodeAll(CliMessage.decoder, bytes)
    expect(whole.length).toBeGreaterThan(5)
    FastCheck.assert(
      FastCheck.property(FastCheck.array(FastCheck.nat(), { maxLength: 40 }), (cuts) => {
        expect(incrementally(splitAt(bytes, cuts))).toEqual(whole)
      }),
      { numRuns: 200 }
    )
  })

  it("keeps every line: an unknown type, a malformed one, bad JSON, an oversized line and a last line without a newline", () => {
    const text = [
      `{"type":"not_a_cli_type"}`,
      `{"type":"result","subtype":"success"}`,
      `not json`,
      `{"type":"x","pad":"${"y".repeat(100)}"}`,
      `{"type":"assistant"`
    ].join("\n")
    const decoded = incrementally(splitAt(encoder.encode(text), [3, 40, 90]), { maxLineBytes: 80 })
    expect(decoded.map((d) => [d._tag, d.line])).toEqual([
      ["Unknown", 1],
      ["Malformed", 2],
      ["Unparseable", 3],
      ["Oversized", 4],
      ["Unparseable", 5]
    ])
  })
})
