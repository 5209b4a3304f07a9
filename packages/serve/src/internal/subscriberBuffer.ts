/**
 * What one SSE subscriber has not taken yet, bounded in events and bytes.
 *
 * The log feeds it; the socket takes everything pending at once, as one
 * write. While frames wait (the socket is busy: the client is behind), a
 * delta joins the pending delta of the same part and field instead of
 * queueing, so a slow client gets fewer, larger frames. When neither fits,
 * the feeder waits: the rest stays on disk, never in memory. A client that
 * takes nothing across `maxStalls` heartbeat ticks, or that the feeder finds
 * too far behind, is sent `server.resync` and dropped.
 *
 * Ids stay exact: a frame's `id:` is the highest seq such that every event up
 * to it has been written, so `Last-Event-ID` replays from the first event not
 * yet delivered. A merged delta carries events from later in the log than the
 * frames after it; those frames then raise the id only once they are written
 * too. (A write torn inside such a run can repeat the run's deltas on
 * replay; a write that completes never does.)
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as SubscriptionRef from "effect/SubscriptionRef"

export interface Options {
  /** The id the client already holds (its `Last-Event-ID`, or the log's end). */
  readonly cursor: number
  /** Pending frames at most. Default 2,048. */
  readonly maxEvents?: number | undefined
  /** Pending bytes at most (UTF-8 of the JSON). Default 1 MiB. */
  readonly maxBytes?: number | undefined
  /** A merged delta frame grows to this many bytes at most. Default 64 KiB. */
  readonly maxFrameBytes?: number | undefined
  /** How far back from the newest pending frame a delta looks for its part. Default 16. */
  readonly mergeWindow?: number | undefined
  /** Heartbeat ticks with frames pending and none taken before the client is stalled. Default 3. */
  readonly maxStalls?: number | undefined
}

/** One logged event for the client. */
export interface Event {
  readonly _tag: "Event"
  readonly seq: number
  /** The JSON of the frame's `data:`. */
  readonly data: string
}

/** A delta of one part's field: mergeable with the pending delta of the same `key`. */
export interface Delta {
  readonly _tag: "Delta"
  readonly seq: number
  readonly key: string
  readonly delta: string
  /** `render(seq, delta)`, done once for the frame as it comes. */
  readonly data: string
  /** The frame's JSON for a merged run: the newest event's fields, the run's text. */
  readonly render: (seq: number, delta: string) => string
}

export type Item = Event | Delta

/** A logged event the client does not get (another directory, a legacy type). */
export interface Skip {
  readonly _tag: "Skip"
  readonly seq: number
}

/** One record of the log, as the feed hands it over. */
export type Entry = Item | Skip

/** How far `tryOfferAll` got: the entries that went in, and why it stopped if not all did. */
export interface Offered {
  readonly accepted: number
  readonly outcome: "accepted" | "full" | "closed"
}

/** A frame that is not a logged event (`server.*`): it carries the cursor the client holds. */
export interface Control {
  readonly render: (cursor: number) => string
  /** At most one pending frame of this kind (heartbeats). */
  readonly kind?: string | undefined
}

export interface Stats {
  readonly pendingEvents: number
  readonly pendingBytes: number
  /** Deltas merged into a pending frame instead of queueing. */
  readonly coalesced: number
  /** The highest id written. */
  readonly cursor: number
  readonly resynced: boolean
}

export interface SubscriberBuffer {
  /** Merges or queues the event; waits while the buffer is full. A no-op once closed. */
  readonly offer: (item: Item) => Effect.Effect<void>
  /** Merges or queues the event if it fits, without waiting. */
  readonly tryOffer: (item: Item) => Effect.Effect<"accepted" | "full" | "closed">
  /**
   * Offers (or skips) the entries in order without waiting, as one step for
   * a chunk of the log: stops at the first event that does not fit, or once closed.
   */
  readonly tryOfferAll: (entries: ReadonlyArray<Entry>) => Effect.Effect<Offered>
  /** Waits until an event fits (or the buffer closed). */
  readonly awaitRoom: Effect.Effect<void>
  /** Queues a control frame past the caps (connected, heartbeats, re-announced asks). */
  readonly control: (frame: Control) => Effect.Effect<void>
  /** An event the client does not get (another directory, a legacy type): heartbeats may move past it. */
  readonly skip: (seq: number) => Effect.Effect<void>
  /** Everything pending as one chunk of SSE text; waits while nothing is. `None` once closed and drained. */
  readonly take: Effect.Effect<Option.Option<string>>
  /** Drops what is pending, queues `server.resync` (rendered with the cursor) and closes. */
  readonly resync: (render: (cursor: number) => string) => Effect.Effect<void>
  /** Called at each heartbeat: `"stalled"` when nothing was taken across `maxStalls` ticks with frames pending. */
  readonly tick: Effect.Effect<"live" | "stalled">
  readonly stats: Effect.Effect<Stats>
  /**
   * The highest seq this client has nothing left of to write: offered or
   * skipped, and written (the socket came back for more), or nothing waits.
   */
  readonly delivered: SubscriptionRef.SubscriptionRef<number>
}

interface Pending {
  /** The oldest seq this frame carries (`undefined`: a control frame). */
  readonly first: number | undefined
  seq: number | undefined
  key: string | undefined
  deltas: Array<string>
  data: string
  bytes: number
  render: ((seq: number, delta: string) => string) | undefined
  readonly control: Control | undefined
}

const byteLength = (text: string) => Buffer.byteLength(text, "utf8")

export const make = (options: Options): Effect.Effect<SubscriberBuffer> =>
  Effect.flatMap(SubscriptionRef.make(options.cursor), (delivered) => Effect.sync(() => {
    const maxEvents = options.maxEvents ?? 2048
    const maxBytes = options.maxBytes ?? 1024 * 1024
    const maxFrameBytes = options.maxFrameBytes ?? 64 * 1024
    const mergeWindow = options.mergeWindow ?? 16
    const maxStalls = options.maxStalls ?? 3
    // Opened while something is pending (or the buffer closed); closed while the socket has it all.
    const readable = Effect.unsafeMakeLatch(false)
    // Opened while an event fits; closed while the buffer is full.
    const room = Effect.unsafeMakeLatch(true)

    let pending: Array<Pending> = []
    let events = 0
    let bytes = 0
    let coalesced = 0
    let cursor = options.cursor
    let closed = false
    let resynced = false
    let takes = 0
    // For `delivered`: the newest seq offered or skipped, the newest in the last chunk taken, and
    // the consumer's state (while it waits in `take`, everything it took before is written).
    let seen = options.cursor
    let takenThrough = options.cursor
    let written = options.cursor
    let waiting = false
    let published = options.cursor
    const publish = Effect.suspend(() => {
      const now = waiting && pending.length === 0 ? seen : written
      if (now <= published) return Effect.void
      published = now
      return SubscriptionRef.set(delivered, now)
    })
    let takesAtTick = 0
    let stalls = 0

    const merge = (item: Delta): boolean => {
      const bound = Math.max(0, pending.length - mergeWindow)
      for (let i = pending.length - 1; i >= bound; i--) {
        const frame = pending[i]!
        // A run of deltas only: no merge across an event, a heartbeat or a resync.
        if (frame.key === undefined) return false
        if (frame.key !== item.key) continue
        const extra = byteLength(item.delta)
        if (frame.bytes + extra > maxFrameBytes || bytes + extra > maxBytes) return false
        frame.deltas.push(item.delta)
        frame.seq = item.seq
        frame.render = item.render
        frame.bytes += extra
        bytes += extra
        coalesced++
        return true
      }
      return false
    }

    const fits = (size: number) => events === 0 || (events < maxEvents && bytes + size <= maxBytes)

    const push = (frame: Pending) => {
      pending.push(frame)
      if (frame.control === undefined) {
        events++
        bytes += frame.bytes
      }
      readable.unsafeOpen()
    }

    /** `true` when the item is in (or the buffer is closed), `false` when it must wait for room. */
    const tryOffer = (item: Item): boolean => {
      if (closed) return true
      if (item._tag === "Delta" && merge(item)) return true
      const size = byteLength(item.data)
      if (!fits(size)) {
        room.unsafeClose()
        return false
      }
      push({
        first: item.seq,
        seq: item.seq,
        key: item._tag === "Delta" ? item.key : undefined,
        deltas: item._tag === "Delta" ? [item.delta] : [],
        data: item.data,
        bytes: size,
        render: item._tag === "Delta" ? item.render : undefined,
        control: undefined
      })
      return true
    }

    const offerNow = (item: Item): Effect.Effect<"accepted" | "full" | "closed"> =>
      Effect.suspend(() => {
        if (closed) return Effect.succeed("closed")
        if (!tryOffer(item)) return Effect.succeed("full")
        seen = Math.max(seen, item.seq)
        return Effect.as(publish, "accepted")
      })

    const skipNow = (seq: number) => {
      // With nothing pending, every frame before it is written: the cursor may move on.
      if (pending.length === 0 && seq > cursor) cursor = seq
      seen = Math.max(seen, seq)
    }

    const offerAll = (entries: ReadonlyArray<Entry>): Effect.Effect<Offered> =>
      Effect.suspend(() => {
        let accepted = 0
        let outcome: Offered["outcome"] = "accepted"
        for (const entry of entries) {
          if (entry._tag === "Skip") {
            skipNow(entry.seq)
          } else if (closed) {
            outcome = "closed"
            break
          } else if (tryOffer(entry)) {
            seen = Math.max(seen, entry.seq)
          } else {
            outcome = "full"
            break
          }
          accepted++
        }
        return Effect.as(publish, { accepted, outcome })
      })

    const offer = (item: Item): Effect.Effect<void> =>
      Effect.flatMap(offerNow(item), (outcome) => outcome === "full" ? Effect.zipRight(room.await, offer(item)) : Effect.void)

    const renderAll = (frames: ReadonlyArray<Pending>): string => {
      // later[i]: the oldest seq carried by a frame after i.
      const later = new Array<number>(frames.length + 1)
      later[frames.length] = Number.POSITIVE_INFINITY
      for (let i = frames.length - 1; i >= 0; i--) later[i] = Math.min(frames[i]!.first ?? Number.POSITIVE_INFINITY, later[i + 1]!)
      let newest = cursor
      let out = ""
      for (let i = 0; i < frames.length; i++) {
        const frame = frames[i]!
        if (frame.control !== undefined) {
          out += `id: ${cursor}\ndata: ${frame.control.render(cursor)}\n\n`
          continue
        }
        newest = Math.max(newest, frame.seq ?? newest)
        const safe = Math.min(newest, later[i + 1]! - 1)
        const data = frame.deltas.length > 1 && frame.render !== undefined && frame.seq !== undefined
          ? frame.render(frame.seq, frame.deltas.join(""))
          : frame.data
        if (safe > cursor) {
          cursor = safe
          out += `id: ${safe}\ndata: ${data}\n\n`
        } else {
          out += `data: ${data}\n\n`
        }
      }
      return out
    }

    const take: Effect.Effect<Option.Option<string>> = Effect.suspend(() => {
      waiting = true
      written = takenThrough
      return Effect.zipRight(publish, readable.await)
    }).pipe(
      Effect.zipRight(Effect.sync(() => {
        waiting = false
        takenThrough = seen
        if (pending.length === 0) return Option.none()
        const frames = pending
        pending = []
        events = 0
        bytes = 0
        takes++
        if (!closed) readable.unsafeClose()
        room.unsafeOpen()
        return Option.some(renderAll(frames))
      }))
    )

    const close = () => {
      closed = true
      readable.unsafeOpen()
      room.unsafeOpen()
    }

    return {
      offer,
      tryOffer: offerNow,
      tryOfferAll: offerAll,
      awaitRoom: room.await,
      control: (frame) =>
        Effect.sync(() => {
          if (closed) return
          if (frame.kind !== undefined && pending.some((p) => p.control?.kind === frame.kind)) return
          push({ first: undefined, seq: undefined, key: undefined, deltas: [], data: "", bytes: 0, render: undefined, control: frame })
        }),
      skip: (seq) =>
        Effect.suspend(() => {
          skipNow(seq)
          return publish
        }),
      take,
      resync: (render) =>
        Effect.sync(() => {
          if (closed) return
          pending = []
          events = 0
          bytes = 0
          resynced = true
          push({ first: undefined, seq: undefined, key: undefined, deltas: [], data: "", bytes: 0, render: undefined, control: { render } })
          close()
        }),
      tick: Effect.sync(() => {
        stalls = pending.length > 0 && takes === takesAtTick ? stalls + 1 : 0
        takesAtTick = takes
        return stalls >= maxStalls ? "stalled" : "live"
      }),
      stats: Effect.sync(() => ({ pendingEvents: events, pendingBytes: bytes, coalesced, cursor, resynced })),
      delivered
    } satisfies SubscriberBuffer
  }))
