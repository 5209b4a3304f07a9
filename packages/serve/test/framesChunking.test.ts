/**
 * However the log's records are grouped into offers, and however often the
 * socket takes, the frames a client reads carry the same events, the same
 * delta text per part, and ids that hold exactly what was written before
 * them; and the bytes a client is written (shared frames and all) are the
 * text `render` gives. Runs of deltas joined per chunk before they are
 * offered (as `sse.ts` joins them once for every client) change none of it.
 */
import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import * as PendingFrames from "../src/internal/pendingFrames.js"

const epoch = "e"
const encoder = new TextEncoder()
const decoder = new TextDecoder()

interface Spec {
  readonly kind: "event" | "delta"
  readonly key: string
  readonly text: string
  /** Whether the item comes with the frame bytes every client shares (as `sse.ts` makes them). */
  readonly shared: boolean
}

const spec: FastCheck.Arbitrary<Spec> = FastCheck.record({
  kind: FastCheck.constantFrom("event", "delta", "delta"),
  key: FastCheck.constantFrom("a", "b"),
  text: FastCheck.string({ minLength: 1, maxLength: 6 }),
  shared: FastCheck.boolean()
})

const encodedOf = (seq: number, data: string): PendingFrames.Encoded => {
  const head = `id: ${epoch}-${seq}\ndata: `
  const frame = encoder.encode(`${head}${data}\n\n`)
  return { size: frame.length - head.length - 2, frame }
}

const itemOf = (s: Spec, seq: number): PendingFrames.Item => {
  if (s.kind === "event") {
    const data = JSON.stringify({ seq })
    return { _tag: "Event", seq, data, encoded: s.shared ? encodedOf(seq, data) : undefined }
  }
  const render = (at: number, delta: string) => JSON.stringify({ seq: at, key: s.key, delta })
  const data = render(seq, s.text)
  return { _tag: "Delta", seq, key: s.key, delta: s.text, data, render, encoded: s.shared ? encodedOf(seq, data) : undefined }
}

interface Read {
  readonly id: number | undefined
  readonly data: { readonly seq: number; readonly key?: string; readonly delta?: string }
}

const parse = (text: string): ReadonlyArray<Read> =>
  text.split("\n\n").filter((raw) => raw !== "").map((raw) => {
    const id = /^id: e-(\d+)$/m.exec(raw)
    return { id: id === null ? undefined : Number(id[1]), data: JSON.parse(/^data: (.*)$/m.exec(raw)![1]!) }
  })

/**
 * Offers the items in `chunks` (sizes, cycled), taking after the chunks
 * `takes` says (cycled): as text and as bytes, from twin buffers. With
 * `join`, each chunk's runs of same-key deltas are joined first (`coalesce`).
 */
const run = (specs: ReadonlyArray<Spec>, chunks: ReadonlyArray<number>, takes: ReadonlyArray<boolean>, join = false) => {
  const caps: PendingFrames.Caps = { maxEvents: 1_000_000, maxBytes: 1 << 30, maxFrameBytes: 40, mergeWindow: 4 }
  const asText = PendingFrames.make(caps)
  const asBytes = PendingFrames.make(caps)
  let text = ""
  let bytes = ""
  let textCursor = 0
  let bytesCursor = 0
  const take = () => {
    const t = PendingFrames.render(asText.drain(), textCursor, epoch)
    text += t.text
    textCursor = t.cursor
    const b = PendingFrames.renderBytes(asBytes.drain(), bytesCursor, epoch)
    bytes += decoder.decode(b.bytes)
    bytesCursor = b.cursor
  }
  let next = 0
  let round = 0
  while (next < specs.length) {
    const size = chunks[round % chunks.length]!
    const chunk = specs.slice(next, next + size)
    const items = (make: (s: Spec, seq: number) => PendingFrames.Item) => {
      const made = chunk.map((s, i) => make(s, next + i + 1))
      return join ? PendingFrames.coalesce(made, 12, encodedOf).flatMap((group) => group.joined.map((j) => j.item)) : made
    }
    for (const item of items(itemOf)) expect(asText.add(item)).toBe(true)
    for (const item of items(itemOf)) expect(asBytes.add(item)).toBe(true)
    next += chunk.length
    if (takes[round % takes.length]!) take()
    round++
  }
  take()
  return { text, bytes, cursor: textCursor, bytesCursor }
}

describe("frames in any chunking", () => {
  it("give the same events, the same text per part, exact ids, and the same bytes as text", () => {
    FastCheck.assert(
      FastCheck.property(
        FastCheck.array(spec, { minLength: 1, maxLength: 60 }),
        FastCheck.array(FastCheck.integer({ min: 1, max: 8 }), { minLength: 1, maxLength: 6 }),
        FastCheck.array(FastCheck.boolean(), { minLength: 1, maxLength: 6 }),
        FastCheck.boolean(),
        (specs, chunks, takes, join) => {
          const { bytes, bytesCursor, cursor, text } = run(specs, chunks, takes, join)
          expect(bytes).toBe(text)
          expect(bytesCursor).toBe(cursor)
          expect(cursor).toBe(specs.length)
          const reads = parse(text)
          // Events once each, in order; the text of each part as it was streamed.
          const events = specs.flatMap((s, i) => s.kind === "event" ? [i + 1] : [])
          expect(reads.filter((r) => r.data.key === undefined).map((r) => r.data.seq)).toEqual(events)
          for (const key of ["a", "b"]) {
            const want = specs.filter((s) => s.kind === "delta" && s.key === key).map((s) => s.text).join("")
            expect(reads.filter((r) => r.data.key === key).map((r) => r.data.delta).join("")).toBe(want)
          }
          // An id holds every event up to it: what a client resuming there would not get again.
          const seen = new Set<number>()
          let last = 0
          for (const read of reads) {
            const carried = read.data.key === undefined ? [read.data.seq] : mergedSeqs(specs, read.data.seq, read.data.key, seen)
            for (const seq of carried) seen.add(seq)
            if (read.id === undefined) continue
            expect(read.id).toBeGreaterThan(last)
            last = read.id
            for (let seq = 1; seq <= read.id; seq++) expect(seen.has(seq)).toBe(true)
          }
        }
      ),
      { numRuns: 300 }
    )
  })

  it("joined per chunk, each stretch of deltas is one item per key: from the key's first seq to its last, its text in order", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.array(spec, { minLength: 1, maxLength: 40 }), (specs) => {
        const items = specs.map((s, i) => itemOf(s, i + 1))
        const groups = PendingFrames.coalesce(items, 12, encodedOf)
        // The groups tile the chunk, in order.
        expect(groups[0]!.start).toBe(0)
        groups.forEach((g, i) => expect(g.end).toBe(i + 1 < groups.length ? groups[i + 1]!.start : items.length))
        for (const { end, joined, start } of groups) {
          const stretch = items.slice(start, end)
          // Every item of the stretch is carried once, by the item of its key.
          expect(joined.reduce((n, j) => n + j.count, 0)).toBe(stretch.length)
          if (stretch.length === 1) {
            expect(joined.map((j) => j.item)).toEqual(stretch)
            continue
          }
          for (const { at, count, item } of joined) {
            if (item._tag !== "Delta") throw new Error("a stretch of more than one item holds deltas only")
            const mine = stretch.filter((c): c is PendingFrames.Delta => c._tag === "Delta" && c.key === item.key)
            expect(mine.length).toBe(count)
            expect(at).toBe(mine[0]!.seq - 1)
            expect(item.first ?? item.seq).toBe(mine[0]!.seq)
            expect(item.seq).toBe(mine[count - 1]!.seq)
            expect(item.delta).toBe(mine.map((c) => c.delta).join(""))
            expect(JSON.parse(item.data)).toEqual(JSON.parse(mine[count - 1]!.render(item.seq, item.delta)))
          }
        }
      }),
      { numRuns: 300 }
    )
  })
})

/** The seqs a merged delta frame carries: its key's deltas up to its seq not seen before. */
const mergedSeqs = (specs: ReadonlyArray<Spec>, seq: number, key: string, seen: ReadonlySet<number>) =>
  specs.flatMap((s, i) => s.kind === "delta" && s.key === key && i + 1 <= seq && !seen.has(i + 1) ? [i + 1] : [])
