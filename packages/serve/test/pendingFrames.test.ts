import { describe, expect, it } from "@effect/vitest"
import * as PendingFrames from "../src/internal/pendingFrames.js"
import * as StallDetector from "../src/internal/stallDetector.js"

const caps: PendingFrames.Caps = { maxEvents: 3, maxBytes: 1000, maxFrameBytes: 100, mergeWindow: 2 }
const render = (seq: number, delta: string) => JSON.stringify({ seq, delta })
const delta = (seq: number, key: string, text: string): PendingFrames.Delta => ({ _tag: "Delta", seq, key, delta: text, data: render(seq, text), render })
const event = (seq: number): PendingFrames.Event => ({ _tag: "Event", seq, data: `"e${seq}"` })
const frame = (item: PendingFrames.Item) => PendingFrames.frameOf(item, PendingFrames.byteLength(item.data))

describe("pendingFrames", () => {
  it("a delta finds the newest frame of its key within the window, never across an event, never past a cap", () => {
    const a = frame(delta(1, "a", "x"))
    const b = frame(delta(2, "b", "y"))
    expect(PendingFrames.mergeTarget([a, b], delta(3, "a", "z"), caps, 0)).toBe(a)
    expect(PendingFrames.mergeTarget([a, b, frame(delta(3, "c", "w"))], delta(4, "a", "z"), caps, 0)).toBeUndefined()
    expect(PendingFrames.mergeTarget([a, frame(event(2))], delta(3, "a", "z"), caps, 0)).toBeUndefined()
    expect(PendingFrames.mergeTarget([a], delta(3, "a", "z".repeat(100)), caps, 0)).toBeUndefined()
    expect(PendingFrames.mergeTarget([a], delta(3, "a", "z"), caps, 1000)).toBeUndefined()
  })

  it("frames queue up to the caps, but one oversized event still goes when nothing is pending", () => {
    const frames = PendingFrames.make({ ...caps, maxBytes: 10 })
    expect(frames.add({ _tag: "Event", seq: 1, data: "x".repeat(50) })).toBe(true)
    expect(frames.add(event(2))).toBe(false)
    frames.control({ render: () => "{}", kind: "heartbeat" })
    frames.control({ render: () => "{}", kind: "heartbeat" })
    expect(frames.size()).toBe(2)
    expect(frames.drain().length).toBe(2)
    expect(frames.stats()).toEqual({ events: 0, bytes: 0, coalesced: 0 })
  })

  it("a delta that joins a pending frame is never rendered alone", () => {
    const rendered: Array<number> = []
    const lazy = (seq: number, key: string, text: string): PendingFrames.Delta => ({
      _tag: "Delta",
      seq,
      key,
      delta: text,
      get data() {
        rendered.push(seq)
        return render(seq, text)
      },
      render
    })
    const frames = PendingFrames.make(caps)
    for (const item of [lazy(1, "a", "x"), lazy(2, "a", "y"), lazy(3, "a", "z")]) expect(frames.add(item)).toBe(true)
    expect(PendingFrames.render(frames.drain(), 0, "e").text).toBe(`id: e-3\ndata: ${render(3, "xyz")}\n\n`)
    // Only the delta that started the frame was read (for its size and its text).
    expect(new Set(rendered)).toEqual(new Set([1]))
  })

  it("a merged run renders as one frame; ids rise only once every event up to them is written", () => {
    const frames = PendingFrames.make(caps)
    for (const item of [delta(1, "a", "x"), delta(2, "b", "y"), delta(3, "a", "z")]) expect(frames.add(item)).toBe(true)
    frames.control({ render: (cursor) => `{"at":${cursor}}` })
    expect(frames.stats().coalesced).toBe(1)
    // The "a" frame carries 1 and 3, the "b" frame 2: the first frame's id is 1, the second's 3.
    const { cursor, text } = PendingFrames.render(frames.drain(), 0, "e")
    expect(text).toBe(`id: e-1\ndata: ${render(3, "xz")}\n\nid: e-3\ndata: ${render(2, "y")}\n\nid: e-3\ndata: {"at":3}\n\n`)
    expect(cursor).toBe(3)
  })

  it("the stall detector: stalled after maxStalls ticks with frames pending and no take, live again after a take", () => {
    const tick = StallDetector.make(2)
    expect(tick(true, 0)).toBe("live")
    expect(tick(true, 0)).toBe("stalled")
    expect(tick(true, 1)).toBe("live")
    expect(tick(false, 1)).toBe("live")
    expect(tick(false, 1)).toBe("live")
  })
})
