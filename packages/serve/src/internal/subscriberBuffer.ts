/**
 * What one SSE subscriber has not taken yet, bounded in events and bytes.
 *
 * The log feeds it; the socket takes everything pending at once, as one
 * write. While frames wait (the socket is busy: the client is behind), a
 * delta joins the pending delta of the same part and field instead of
 * queueing, so a slow client gets fewer, larger frames. (Deltas of one part
 * that reach the log together come as one item already: `sse.ts` joins each
 * chunk's runs once for every client.) When neither fits,
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
import * as Pacer from "./pacer.js"
import * as PendingFrames from "./pendingFrames.js"
import type { Control, Item } from "./pendingFrames.js"
import * as StallDetector from "./stallDetector.js"

export interface Options {
  /** The id the client already holds (its `Last-Event-ID`, or the log's end). */
  readonly cursor: number
  /** The log's epoch, written before each `id:` seq. */
  readonly epoch: string
  /** Pending frames at most. Default 2,048. */
  readonly maxEvents?: number | undefined
  /** Pending bytes at most (UTF-8 of the JSON). Default 1 MiB. */
  readonly maxBytes?: number | undefined
  /** A merged delta frame grows to this many bytes at most. Default 64 KiB. */
  readonly maxFrameBytes?: number | undefined
  /** How far back from the newest pending frame a delta looks for its part. Default 16. */
  readonly mergeWindow?: number | undefined
  /**
   * While frames keep coming, a take within this many ms of the last waits out the rest, so that
   * a client that keeps up gets one write per window, not one per chunk of the log (200 clients
   * on one turn). A take after a quiet stretch, and the one right after it, go at once.
   * Default 40 (on the live clock: it paces writes, no test steps through it).
   */
  readonly takeWindowMillis?: number | undefined
  /** Heartbeat ticks with frames pending and none taken before the client is stalled. Default 3. */
  readonly maxStalls?: number | undefined
}

export type { Control, Delta, Encoded, Event, Item } from "./pendingFrames.js"

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

export interface OfferedNow extends Offered {
  /** Publishes the client's progress; `undefined` when it did not move. */
  readonly publish: Effect.Effect<void> | undefined
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
  /**
   * `tryOfferAll` as a plain call, for the shared feed's hand-out to every
   * client: no effect per client per chunk, only `publish` (the client's
   * progress, when it moved) to run.
   */
  readonly offerAllNow: (entries: ReadonlyArray<Entry>) => OfferedNow
  /** Whether all the entries' events fit now, whatever merges (a closed buffer takes anything). */
  readonly fitsAll: (entries: ReadonlyArray<Entry>) => boolean
  /** Waits until an event fits (or the buffer closed). */
  readonly awaitRoom: Effect.Effect<void>
  /** Queues a control frame past the caps (connected, heartbeats, re-announced asks). */
  readonly control: (frame: Control) => Effect.Effect<void>
  /** An event the client does not get (another directory, a legacy type): heartbeats may move past it. */
  readonly skip: (seq: number) => Effect.Effect<void>
  /** Everything pending as one chunk of SSE text; waits while nothing is. `None` once closed and drained. */
  readonly take: Effect.Effect<Option.Option<string>>
  /** `take` as the bytes for the socket: lone events as the bytes every client of their format shares. */
  readonly takeBytes: Effect.Effect<Option.Option<Uint8Array>>
  /** Drops what is pending and closes: `take` returns `None` (the server is closing). */
  readonly end: Effect.Effect<void>
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

/**
 * `delivered` as the consumer makes progress: the newest seq offered or
 * skipped, the newest in the last chunk taken, and whether the consumer waits
 * in `take` (then everything it took before is written, and with nothing
 * pending, everything seen is).
 */
const makeProgress = (delivered: SubscriptionRef.SubscriptionRef<number>, cursor: number, idle: () => boolean) => {
  let seen = cursor
  let takenThrough = cursor
  let written = cursor
  let waiting = false
  let published = cursor
  return {
    see: (seq: number) => {
      seen = Math.max(seen, seq)
    },
    waits: () => {
      waiting = true
      written = takenThrough
    },
    takes: () => {
      waiting = false
      takenThrough = seen
    },
    /** The progress to publish, if it moved: `undefined` when it did not. */
    publishNow: (): Effect.Effect<void> | undefined => {
      const now = waiting && idle() ? seen : written
      if (now <= published) return undefined
      published = now
      return SubscriptionRef.set(delivered, now)
    }
  }
}

export const make = (options: Options): Effect.Effect<SubscriberBuffer> =>
  Effect.flatMap(SubscriptionRef.make(options.cursor), (delivered) => Effect.sync(() => {
    const frames = PendingFrames.make({
      maxEvents: options.maxEvents ?? 2048,
      maxBytes: options.maxBytes ?? 1024 * 1024,
      maxFrameBytes: options.maxFrameBytes ?? 64 * 1024,
      mergeWindow: options.mergeWindow ?? 16
    })
    const stalled = StallDetector.make(options.maxStalls ?? 3)
    // Opened while something is pending (or the buffer closed); closed while the socket has it all.
    const readable = Effect.unsafeMakeLatch(false)
    // Opened while an event fits; closed while the buffer is full.
    const room = Effect.unsafeMakeLatch(true)

    let cursor = options.cursor
    let closed = false
    let resynced = false
    let takes = 0
    const progress = makeProgress(delivered, options.cursor, () => frames.size() === 0)
    const publish = Effect.suspend(() => progress.publishNow() ?? Effect.void)

    /** `true` when the item is in (or the buffer is closed), `false` when it must wait for room. */
    const tryOffer = (item: Item): boolean => {
      if (closed) return true
      if (!frames.add(item)) {
        room.unsafeClose()
        return false
      }
      readable.unsafeOpen()
      return true
    }

    const control = (frame: Control) => {
      frames.control(frame)
      readable.unsafeOpen()
    }

    const skipNow = (seq: number) => {
      // With nothing pending, every frame before it is written: the cursor may move on.
      if (frames.size() === 0 && seq > cursor) cursor = seq
      progress.see(seq)
    }

    const offerNow = (item: Item): Effect.Effect<"accepted" | "full" | "closed"> =>
      Effect.suspend(() => {
        if (closed) return Effect.succeed("closed")
        if (!tryOffer(item)) return Effect.succeed("full")
        progress.see(item.seq)
        return Effect.as(publish, "accepted")
      })

    const offerAllNow = (entries: ReadonlyArray<Entry>): OfferedNow => {
      let accepted = 0
      let outcome: Offered["outcome"] = "accepted"
      for (const entry of entries) {
        if (entry._tag === "Skip") {
          skipNow(entry.seq)
        } else if (closed) {
          outcome = "closed"
          break
        } else if (tryOffer(entry)) {
          progress.see(entry.seq)
        } else {
          outcome = "full"
          break
        }
        accepted++
      }
      return { accepted, outcome, publish: progress.publishNow() }
    }
    const offerAll = (entries: ReadonlyArray<Entry>): Effect.Effect<Offered> =>
      Effect.suspend(() => {
        const { accepted, outcome, publish } = offerAllNow(entries)
        const offered: Offered = { accepted, outcome }
        return publish === undefined ? Effect.succeed(offered) : Effect.as(publish, offered)
      })

    const offer = (item: Item): Effect.Effect<void> =>
      Effect.flatMap(offerNow(item), (outcome) => outcome === "full" ? Effect.zipRight(room.await, offer(item)) : Effect.void)

    const pacer = Pacer.make(options.takeWindowMillis ?? 40, { skip: () => closed, streaks: true })
    const takeWith = <A>(render: (frames: ReadonlyArray<PendingFrames.Frame>) => { readonly cursor: number; readonly out: A }) =>
      Effect.suspend(() => {
        progress.waits()
        return Effect.zipRight(publish, readable.await)
      }).pipe(
        Effect.zipRight(pacer.wait),
        Effect.zipRight(Effect.sync((): Option.Option<A> => {
          progress.takes()
          if (frames.size() === 0) return Option.none()
          takes++
          pacer.took()
          const rendered = render(frames.drain())
          cursor = rendered.cursor
          if (!closed) readable.unsafeClose()
          room.unsafeOpen()
          return Option.some(rendered.out)
        }))
      )
    const take = takeWith((drained) => {
      const { cursor: after, text } = PendingFrames.render(drained, cursor, options.epoch)
      return { cursor: after, out: text }
    })
    const takeBytes = takeWith((drained) => {
      const { bytes, cursor: after } = PendingFrames.renderBytes(drained, cursor, options.epoch)
      return { cursor: after, out: bytes }
    })

    return {
      offer,
      tryOffer: offerNow,
      tryOfferAll: offerAll,
      offerAllNow,
      fitsAll: (entries) => closed || frames.fitsAll(entries.filter((entry): entry is Item => entry._tag !== "Skip")),
      awaitRoom: room.await,
      control: (frame) =>
        Effect.sync(() => {
          if (!closed) control(frame)
        }),
      skip: (seq) =>
        Effect.suspend(() => {
          skipNow(seq)
          return publish
        }),
      take,
      takeBytes,
      end: Effect.sync(() => {
        frames.clear()
        closed = true
        readable.unsafeOpen()
        room.unsafeOpen()
      }),
      resync: (render) =>
        Effect.sync(() => {
          if (closed) return
          frames.clear()
          resynced = true
          control({ render })
          closed = true
          readable.unsafeOpen()
          room.unsafeOpen()
        }),
      tick: Effect.sync(() => stalled(frames.size() > 0, takes)),
      stats: Effect.sync(() => {
        const { bytes, coalesced, events } = frames.stats()
        return { pendingEvents: events, pendingBytes: bytes, coalesced, cursor, resynced }
      }),
      delivered
    } satisfies SubscriberBuffer
  }))
