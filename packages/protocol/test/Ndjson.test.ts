import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, FastCheck, Stream } from "effect"
import { Ndjson } from "@skein/protocol"
import { splitAt } from "./cuts.js"

const encoder = new TextEncoder()

const frameChunks = (chunks: ReadonlyArray<Uint8Array>, options?: Ndjson.FrameOptions) =>
  Stream.fromIterable(chunks).pipe(Ndjson.frames(options), Stream.runCollect, Effect.map(Chunk.toReadonlyArray))

describe("Ndjson.frames", () => {
  it.effect("keeps a multi-byte character split across chunks intact", () =>
    Effect.gen(function*() {
      const bytes = encoder.encode(`{"text":"héllo 日本 🧶"}\n`)
      // Cut inside every multi-byte sequence at once: one byte per chunk.
      const chunks = Array.from(bytes, (b) => Uint8Array.of(b))
      const frames = yield* frameChunks(chunks)
      expect(frames).toEqual([{ _tag: "Line", line: 1, text: `{"text":"héllo 日本 🧶"}` }])
    }))

  it.effect("handles CRLF, blank lines and a last line without newline", () =>
    Effect.gen(function*() {
      const frames = yield* frameChunks([encoder.encode("a\r\n\r\n  \n\nb\nc")])
      expect(frames).toEqual([
        { _tag: "Line", line: 1, text: "a" },
        { _tag: "Line", line: 5, text: "b" },
        { _tag: "Line", line: 6, text: "c" }
      ])
    }))

  it.effect("reports an oversized line and resyncs at the next newline", () =>
    Effect.gen(function*() {
      const huge = "x".repeat(100)
      const bytes = encoder.encode(`ok\n${huge}\nafter\n${huge}`)
      const frames = yield* frameChunks(splitAt(bytes, [5, 17, 50, 103, 160]), { maxLineBytes: 64 })
      expect(frames).toEqual([
        { _tag: "Line", line: 1, text: "ok" },
        { _tag: "Oversized", line: 2, bytes: 100, limit: 64 },
        { _tag: "Line", line: 3, text: "after" },
        { _tag: "Oversized", line: 4, bytes: 100, limit: 64 }
      ])
    }))

  it.effect("does not let the caller's buffer reuse corrupt a pending line", () =>
    Effect.gen(function*() {
      const buffer = encoder.encode(`{"a":1`)
      // The second chunk is produced only after the framer took the first.
      const input = Stream.make(buffer).pipe(
        Stream.concat(Stream.suspend(() => {
          buffer.fill(0x20)
          return Stream.make(encoder.encode("}\n"))
        }))
      )
      const frames = yield* input.pipe(
        Ndjson.frames(),
        Stream.runCollect
      )
      expect(Chunk.toReadonlyArray(frames)).toEqual([{ _tag: "Line", line: 1, text: `{"a":1}` }])
    }))

  it("frames the same lines under any chunking", () => {
    const line = FastCheck.oneof(
      FastCheck.string({ unit: "grapheme", maxLength: 40 }),
      FastCheck.json({ maxDepth: 2 }),
      FastCheck.constantFrom("", "\r", "  ", "🧶🧶", "日本語")
    )
    FastCheck.assert(
      FastCheck.property(
        FastCheck.array(line, { maxLength: 20 }),
        FastCheck.constantFrom("\n", "\r\n"),
        FastCheck.boolean(),
        FastCheck.array(FastCheck.nat(), { maxLength: 30 }),
        (lines, eol, trailing, cuts) => {
          const text = lines.map((l) => l.replace(/[\r\n]/g, " ")).join(eol) + (trailing ? eol : "")
          const bytes = encoder.encode(text)
          const whole = Ndjson.framesOf(bytes)
          const chunked = Effect.runSync(frameChunks(splitAt(bytes, cuts)))
          expect(chunked).toEqual(whole)
          // Blank is ASCII whitespace and BOMs only: a line of U+00A0 or U+3000 is a
          // line (JSON does not take them as whitespace either), not skipped.
          expect(whole.map((f) => f._tag === "Line" ? f.text : "")).toEqual(
            lines.map((l) => l.replace(/[\r\n]/g, " ")).filter((l) => !/^[ \t\r\v\f\uFEFF]*$/.test(l))
          )
        }
      ),
      { numRuns: 500 }
    )
  })

  it("decodes each line as a line-at-a-time reference does, on arbitrary bytes and limits", () => {
    // The reference decodes each line alone, as the framer did before it
    // decoded whole runs of lines at once.
    const reference = (bytes: Uint8Array, maxLineBytes: number): Array<Ndjson.Frame> => {
      const out: Array<Ndjson.Frame> = []
      let line = 0
      let from = 0
      while (from < bytes.length) {
        const nl = bytes.indexOf(0x0a, from)
        const to = nl === -1 ? bytes.length : nl
        line++
        if (to - from > maxLineBytes) {
          out.push({ _tag: "Oversized", line, bytes: to - from, limit: maxLineBytes })
        } else {
          const end = to > from && bytes[to - 1] === 0x0d ? to - 1 : to
          const text = new TextDecoder().decode(bytes.subarray(from, end))
          if (end > from && text.replace(/[ \t\r\v\f\uFEFF]/g, "").length > 0) out.push({ _tag: "Line", line, text })
        }
        from = to + 1
      }
      return out
    }
    const piece = FastCheck.oneof(
      FastCheck.uint8Array({ maxLength: 12 }),
      FastCheck.constantFrom(
        Uint8Array.of(0x0a),
        Uint8Array.of(0x0d, 0x0a),
        Uint8Array.of(0xef, 0xbb, 0xbf),
        Uint8Array.of(0xf0, 0x9f),
        Uint8Array.of(0xe6, 0x97, 0xa5),
        encoder.encode(`{"a":"b"}`)
      )
    )
    FastCheck.assert(
      FastCheck.property(
        FastCheck.array(piece, { maxLength: 40 }),
        FastCheck.array(FastCheck.nat(), { maxLength: 12 }),
        FastCheck.integer({ min: 1, max: 80 }),
        (pieces, cuts, maxLineBytes) => {
          const bytes = new Uint8Array(pieces.flatMap((p) => [...p]))
          const expected = reference(bytes, maxLineBytes)
          expect(Ndjson.framesOf(bytes, { maxLineBytes })).toEqual(expected)
          expect(Effect.runSync(frameChunks(splitAt(bytes, cuts), { maxLineBytes }))).toEqual(expected)
        }
      ),
      { numRuns: 1000 }
    )
  })

  it.effect("pack writes one JSON value per line", () =>
    Effect.gen(function*() {
      const bytes = yield* Stream.make({ a: "x\ny" }, [1, 2]).pipe(Ndjson.pack, Stream.runCollect)
      const text = Chunk.toReadonlyArray(bytes).map((b) => new TextDecoder().decode(b)).join("")
      expect(text).toBe(`{"a":"x\\ny"}\n[1,2]\n`)
    }))
})
