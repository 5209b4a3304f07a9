import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Option, SubscriptionRef } from "effect"
import * as SubscriberBuffer from "../src/internal/subscriberBuffer.js"

const event = (seq: number, text = `e${seq}`): SubscriberBuffer.Item => ({ _tag: "Event", seq, data: JSON.stringify({ seq, text }) })

const render = (key: string) => (seq: number, delta: string) => JSON.stringify({ seq, key, delta })
const delta = (seq: number, key: string, text: string): SubscriberBuffer.Item => ({
  _tag: "Delta",
  seq,
  key,
  delta: text,
  data: render(key)(seq, text),
  render: render(key)
})

interface Frame {
  readonly id: number | undefined
  readonly data: { readonly [key: string]: unknown }
}

/** The SSE text of one take, as frames. */
const frames = (text: string): ReadonlyArray<Frame> =>
  text.split("\n\n").filter((raw) => raw.length > 0).map((raw) => {
    let id: number | undefined
    let data = ""
    for (const line of raw.split("\n")) {
      if (line.startsWith("id: ")) id = Number(line.slice(4).split("-").pop())
      if (line.startsWith("data: ")) data = line.slice(6)
    }
    return { id, data: JSON.parse(data) }
  })

const takeFrames = (buffer: SubscriberBuffer.SubscriberBuffer) =>
  Effect.map(buffer.take, (chunk) => frames(Option.getOrThrow(chunk)))

/** Lets forked fibers run as far as they can. */
const settle = Effect.repeatN(Effect.yieldNow(), 20)

describe("subscriberBuffer", () => {
  it.effect("events wait in order and are taken at once, each with its seq as id", () =>
    Effect.gen(function*() {
      const buffer = yield* SubscriberBuffer.make({ cursor: 0, epoch: "e" })
      const taker = yield* Effect.fork(takeFrames(buffer))
      yield* settle
      expect(yield* Fiber.poll(taker)).toEqual(Option.none())
      yield* buffer.offer(event(1))
      yield* buffer.offer(event(2))
      // The waiting taker wakes to everything pending by then.
      const first = yield* Fiber.join(taker)
      expect(first.map((f) => f.id)).toEqual([1, 2])
      yield* buffer.offer(event(3))
      const second = yield* takeFrames(buffer)
      expect(second).toEqual([{ id: 3, data: { seq: 3, text: "e3" } }])
      expect((yield* buffer.stats).cursor).toBe(3)
    }))

  it.effect("deltas of one part merge while they wait: one frame, the joined text, the newest seq", () =>
    Effect.gen(function*() {
      const buffer = yield* SubscriberBuffer.make({ cursor: 10, epoch: "e" })
      yield* buffer.offer(event(11))
      for (let i = 0; i < 100; i++) yield* buffer.offer(delta(12 + i, "part-a", `w${i} `))
      const taken = yield* takeFrames(buffer)
      expect(taken).toHaveLength(2)
      expect(taken[1]).toEqual({
        id: 111,
        data: { seq: 111, key: "part-a", delta: Array.from({ length: 100 }, (_, i) => `w${i} `).join("") }
      })
      expect((yield* buffer.stats).coalesced).toBe(99)
    }))

  it.effect("interleaved parts merge each into its own frame; an id never claims an event not yet written", () =>
    Effect.gen(function*() {
      const buffer = yield* SubscriberBuffer.make({ cursor: 0, epoch: "e" })
      // The dual-write shape: a raw stream event, then its canonical delta, per CLI delta.
      yield* buffer.offer(delta(1, "raw", "a"))
      yield* buffer.offer(delta(2, "canonical", "a"))
      yield* buffer.offer(delta(3, "raw", "b"))
      yield* buffer.offer(delta(4, "canonical", "b"))
      const taken = yield* takeFrames(buffer)
      // The first frame holds 1 and 3 but 2 is still to come: it may claim 1 only.
      expect(taken).toEqual([
        { id: 1, data: { seq: 3, key: "raw", delta: "ab" } },
        { id: 4, data: { seq: 4, key: "canonical", delta: "ab" } }
      ])
    }))

  it.effect("a delta does not merge across another event, nor past the frame size cap", () =>
    Effect.gen(function*() {
      const buffer = yield* SubscriberBuffer.make({ cursor: 0, epoch: "e", maxFrameBytes: 60 })
      yield* buffer.offer(delta(1, "k", "x"))
      yield* buffer.offer(event(2))
      yield* buffer.offer(delta(3, "k", "y"))
      yield* buffer.offer(delta(4, "k", "z".repeat(40)))
      const taken = yield* takeFrames(buffer)
      expect(taken.map((f) => f.id)).toEqual([1, 2, 3, 4])
      expect((yield* buffer.stats).coalesced).toBe(0)
    }))

  it.effect("the event cap: a full buffer makes the feeder wait until the socket takes", () =>
    Effect.gen(function*() {
      const buffer = yield* SubscriberBuffer.make({ cursor: 0, epoch: "e", maxEvents: 3 })
      const feeder = yield* Effect.fork(Effect.forEach([1, 2, 3, 4, 5], (seq) => buffer.offer(event(seq)), { discard: true }))
      yield* settle
      expect(yield* Fiber.poll(feeder)).toEqual(Option.none())
      expect((yield* buffer.stats).pendingEvents).toBe(3)
      expect((yield* takeFrames(buffer)).map((f) => f.id)).toEqual([1, 2, 3])
      yield* Fiber.join(feeder)
      expect((yield* takeFrames(buffer)).map((f) => f.id)).toEqual([4, 5])
    }))

  it.effect("the byte cap: pending bytes stay under it, merges included", () =>
    Effect.gen(function*() {
      const buffer = yield* SubscriberBuffer.make({ cursor: 0, epoch: "e", maxBytes: 200 })
      const feeder = yield* Effect.fork(
        Effect.forEach(Array.from({ length: 50 }, (_, i) => i + 1), (seq) => buffer.offer(delta(seq, "k", "0123456789")), { discard: true })
      )
      yield* settle
      expect(yield* Fiber.poll(feeder)).toEqual(Option.none())
      const stats = yield* buffer.stats
      expect(stats.pendingBytes).toBeLessThanOrEqual(200)
      expect(stats.pendingBytes).toBeGreaterThan(150)
      let text = ""
      while (Option.isNone(yield* Fiber.poll(feeder)) || (yield* buffer.stats).pendingEvents > 0) {
        for (const f of yield* takeFrames(buffer)) text += String(f.data["delta"])
        yield* settle
      }
      expect(text).toBe("0123456789".repeat(50))
    }))

  it.effect("resync drops what waits, sends server.resync with the cursor written so far, then ends", () =>
    Effect.gen(function*() {
      const buffer = yield* SubscriberBuffer.make({ cursor: 0, epoch: "e", maxEvents: 2 })
      yield* buffer.offer(event(1))
      expect((yield* takeFrames(buffer)).map((f) => f.id)).toEqual([1])
      yield* buffer.offer(event(2))
      yield* buffer.offer(event(3))
      const feeder = yield* Effect.fork(buffer.offer(event(4)))
      yield* settle
      yield* buffer.resync((cursor) => JSON.stringify({ type: "server.resync", cursor }))
      yield* Fiber.join(feeder)
      yield* buffer.offer(event(5))
      expect(yield* takeFrames(buffer)).toEqual([{ id: 1, data: { type: "server.resync", cursor: 1 } }])
      expect(yield* buffer.take).toEqual(Option.none())
      expect((yield* buffer.stats).resynced).toBe(true)
    }))

  it.effect("control frames pass the caps and carry the cursor; one heartbeat waits at most", () =>
    Effect.gen(function*() {
      const buffer = yield* SubscriberBuffer.make({ cursor: 7, epoch: "e", maxEvents: 1 })
      const beat = { kind: "heartbeat", render: (cursor: number) => JSON.stringify({ type: "server.heartbeat", cursor }) }
      yield* buffer.control({ render: (cursor) => JSON.stringify({ type: "server.connected", cursor }) })
      yield* buffer.offer(event(8))
      yield* buffer.control(beat)
      yield* buffer.control(beat)
      expect(yield* takeFrames(buffer)).toEqual([
        { id: 7, data: { type: "server.connected", cursor: 7 } },
        { id: 8, data: { seq: 8, text: "e8" } },
        { id: 8, data: { type: "server.heartbeat", cursor: 8 } }
      ])
      // An event this client does not get moves the cursor when nothing waits.
      yield* buffer.skip(12)
      yield* buffer.control(beat)
      expect(yield* takeFrames(buffer)).toEqual([{ id: 12, data: { type: "server.heartbeat", cursor: 12 } }])
    }))

  it.effect("a socket that takes nothing across maxStalls ticks, with frames waiting, is stalled", () =>
    Effect.gen(function*() {
      const buffer = yield* SubscriberBuffer.make({ cursor: 0, epoch: "e", maxStalls: 2 })
      // Idle but alive: nothing waits.
      expect(yield* buffer.tick).toBe("live")
      expect(yield* buffer.tick).toBe("live")
      yield* buffer.offer(event(1))
      expect(yield* buffer.tick).toBe("live")
      yield* buffer.take
      yield* buffer.offer(event(2))
      // It took since the last tick: still live.
      expect(yield* buffer.tick).toBe("live")
      expect(yield* buffer.tick).toBe("live")
      expect(yield* buffer.tick).toBe("stalled")
    }))

  it.effect("delivered: what the socket has written, known when it comes back for more", () =>
    Effect.gen(function*() {
      const buffer = yield* SubscriberBuffer.make({ cursor: 0, epoch: "e" })
      const delivered = SubscriptionRef.get(buffer.delivered)
      yield* buffer.offer(event(1))
      yield* buffer.offer(event(2))
      expect(yield* delivered).toBe(0)
      yield* buffer.take
      // Taken, maybe not written yet.
      expect(yield* delivered).toBe(0)
      const next = yield* Effect.fork(buffer.take)
      yield* settle
      expect(yield* delivered).toBe(2)
      // Skipped while nothing waits: delivered too.
      yield* buffer.skip(5)
      expect(yield* delivered).toBe(5)
      yield* buffer.offer(event(6))
      yield* Fiber.join(next)
      expect(yield* delivered).toBe(5)
    }))
  it.effect("tryOfferAll takes a chunk in order, skips included, up to the first event that does not fit; none once closed", () =>
    Effect.gen(function*() {
      const buffer = yield* SubscriberBuffer.make({ cursor: 0, epoch: "e", maxEvents: 2 })
      const chunk: ReadonlyArray<SubscriberBuffer.Entry> = [event(1), { _tag: "Skip", seq: 2 }, event(3), event(4)]
      expect(yield* buffer.tryOfferAll(chunk)).toEqual({ accepted: 3, outcome: "full" })
      expect((yield* takeFrames(buffer)).map((f) => f.id)).toEqual([1, 3])
      expect(yield* buffer.tryOfferAll(chunk.slice(3))).toEqual({ accepted: 1, outcome: "accepted" })
      expect((yield* takeFrames(buffer)).map((f) => f.id)).toEqual([4])
      yield* buffer.resync(() => "{}")
      expect(yield* buffer.tryOfferAll([event(5)])).toEqual({ accepted: 0, outcome: "closed" })
    }))
})
