/**
 * `GET /event` and `GET /global/event`: the durable log as SSE.
 *
 * Each frame's `id:` is the log's seq, so `Last-Event-ID` (header, or
 * `?lastEventId=` for a browser's first EventSource connection) resumes
 * exactly after the last frame the client got. Frames that are not events
 * (`server.connected`, heartbeats, re-announced asks) carry the cursor the
 * client already holds.
 *
 * Between the log and the socket sits the client's bounded buffer
 * (`subscriberBuffer`): deltas of one part merge while the client is behind,
 * and the follower waits (reading the rest from disk later) while the buffer
 * is full. A client whose full buffer makes room only once it is more than
 * `maxLag` live events behind (counting only the events it gets) is sent
 * `server.resync` and closed; a client that keeps reading is never cut off
 * for the feed being slower than the log. One whose socket takes nothing for
 * `maxStalls` heartbeats is dead and its socket is destroyed. A socket whose
 * write fails closes the response, which interrupts all of this.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import type { Canonical } from "@skein/protocol"
import { Canonical as C } from "@skein/protocol"
import * as Chunk from "effect/Chunk"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { EventLog } from "@skein/store"
import { IncomingMessage } from "node:http"
import type { PermissionBroker } from "../PermissionBroker.js"
import { eventId, type Record, type ServerEvents } from "../ServerEvents.js"
import * as ChunkEntries from "./chunkEntries.js"
import * as PendingFrames from "./pendingFrames.js"
import * as SubscriberBuffer from "./subscriberBuffer.js"

export interface Options {
  readonly events: ServerEvents["Type"]
  readonly broker: PermissionBroker["Type"]
  /** `/event`: one directory; `/global/event`: every directory, in `{directory, payload}` envelopes. */
  readonly directory: string | undefined
  /** The client's cursor (`<epoch>-<seq>`, or a bare seq from an older server), as sent. */
  readonly lastEventId: string | undefined
  /** `/global/event`: the directories this server may show (its roots); the log may hold other roots' events of earlier runs. */
  readonly visible?: ((directory: string) => boolean) | undefined
  /** `Accept-Event-Version: 2`: the canonical events only, without the legacy dual-write. */
  readonly canonicalOnly: boolean
  readonly heartbeat: Duration.DurationInput
  readonly maxLag: number
  /**
   * Completes when the server closes: the stream then ends (Node's server waits for every open
   * connection). One waiting fiber per client, where `Stream.interruptWhen` forked one per frame.
   */
  readonly until?: Effect.Effect<void> | undefined
  /** The client's buffer: caps in events and bytes, stalls before it is dead. */
  readonly buffer?: Omit<SubscriberBuffer.Options, "cursor" | "epoch"> | undefined
}

interface Payload {
  readonly type: string
  readonly properties: unknown
}

const wrap = (global: boolean, directory: string, payload: Payload, id: string) =>
  global ? { directory, payload: { id, ...payload } } : { id, ...payload }

interface Mergeable {
  readonly key: string
  readonly delta: string
}

const isRecord = (u: unknown): u is { readonly [key: string]: unknown } => typeof u === "object" && u !== null

/** The raw CLI delta inside a legacy `session.stream_event`: its text field and the text. */
const rawDelta = (event: unknown): { readonly index: unknown; readonly type: string; readonly field: string; readonly text: string } | undefined => {
  if (!isRecord(event) || event["type"] !== "content_block_delta" || !isRecord(event["delta"])) return undefined
  const delta = event["delta"]
  for (const field of ["text", "thinking", "partial_json"]) {
    const text = delta[field]
    if (Predicate.isString(text) && Predicate.isString(delta["type"])) return { index: event["index"], type: delta["type"], field, text }
  }
  return undefined
}

/**
 * The deltas a slow client may get merged: `message.part.delta`, opencode's
 * older `message.part.updated` with a `delta`, and the legacy raw
 * `session.stream_event` text, thinking and tool-input deltas.
 */
export const mergeable = (payload: Payload): Mergeable | undefined => {
  const p = payload.properties
  if (!isRecord(p)) return undefined
  switch (payload.type) {
    case "message.part.delta": {
      const delta = p["delta"]
      if (!Predicate.isString(delta) || !Predicate.isString(p["partID"])) return undefined
      return { key: `d ${p["partID"]} ${String(p["field"])}`, delta }
    }
    case "message.part.updated": {
      const delta = p["delta"]
      const part = p["part"]
      if (!Predicate.isString(delta) || !isRecord(part) || !Predicate.isString(part["id"])) return undefined
      return { key: `u ${part["id"]}`, delta }
    }
    case "session.stream_event": {
      const message = p["message"]
      if (!isRecord(message)) return undefined
      const raw = rawDelta(message["event"])
      if (raw === undefined) return undefined
      return { key: `s ${String(p["sessionID"])} ${String(message["parent_tool_use_id"])} ${String(raw.index)} ${raw.type}`, delta: raw.text }
    }
    default:
      return undefined
  }
}

/** A mergeable payload with its delta's text replaced: the newest event's fields, a merged run's text. */
const withDelta = (payload: Payload, text: string): Payload => {
  const p = payload.properties as { readonly [key: string]: unknown }
  if (payload.type !== "session.stream_event") return { type: payload.type, properties: { ...p, delta: text } }
  const message = p["message"] as { readonly [key: string]: unknown }
  const event = message["event"]
  const raw = rawDelta(event)!
  return {
    type: payload.type,
    properties: { ...p, message: { ...message, event: isRecord(event) ? { ...event, delta: { type: raw.type, [raw.field]: text } } : event } }
  }
}

const encoder = new TextEncoder()

/** An event's frame alone, encoded once: the bytes every client of its format is written. */
const encodedOf = (epoch: string, seq: number, data: string): SubscriberBuffer.Encoded => {
  const head = `id: ${epoch}-${seq}\ndata: `
  const frame = encoder.encode(`${head}${data}\n\n`)
  // The head is ASCII: its bytes are its characters.
  return { size: frame.length - head.length - 2, frame }
}

/** The record's frame JSON, with `payload` in place of its own. */
const renderOf = (global: boolean, record: Record, seq: number, payload: Payload) =>
  JSON.stringify(wrap(global, record.message.directory, payload, eventId(seq)))

/**
 * A logged event as the buffer's item, rendered and encoded on first use.
 * Classes, not object literals of closures: one is made per record, for each
 * format.
 */
abstract class RenderedItem {
  readonly seq: number
  private rendered: string | undefined
  private bytes: SubscriberBuffer.Encoded | undefined
  constructor(readonly record: Record, readonly global: boolean, readonly epoch: string) {
    this.seq = record.seq
  }
  get data(): string {
    return (this.rendered ??= renderOf(this.global, this.record, this.seq, this.record.message.payload))
  }
  get encoded(): SubscriberBuffer.Encoded {
    return (this.bytes ??= encodedOf(this.epoch, this.seq, this.data))
  }
}

class EventItem extends RenderedItem implements PendingFrames.Event {
  readonly _tag = "Event"
}

/**
 * A delta as the buffer's item. Rendered when first read: a delta that joins
 * a pending frame never is (a client behind in a storm merged 100,000 deltas
 * into about 100 frames, each rendered once).
 */
class DeltaItem extends RenderedItem implements PendingFrames.Delta {
  readonly _tag = "Delta"
  private size: number | undefined
  private template: { readonly head: string; readonly tail: string } | null | undefined
  constructor(record: Record, global: boolean, epoch: string, readonly key: string, readonly delta: string) {
    super(record, global, epoch)
  }
  get deltaBytes(): number {
    return (this.size ??= Buffer.byteLength(this.delta, "utf8"))
  }
  render(seq: number, delta: string): string {
    const payload = this.record.message.payload
    if (seq !== this.seq) return renderOf(this.global, this.record, seq, withDelta(payload, delta))
    // A merged run's frame, rendered once per client that merged it: the JSON around the
    // text is made once, shared by every client, and only the text is stringified.
    this.template ??= templateOf(renderOf(this.global, this.record, seq, withDelta(payload, marker)))
    return this.template === null
      ? renderOf(this.global, this.record, seq, withDelta(payload, delta))
      : this.template.head + JSON.stringify(delta) + this.template.tail
  }
}

const makeItem = (global: boolean, record: Record, epoch: string): SubscriberBuffer.Item => {
  const merge = mergeable(record.message.payload)
  return merge === undefined ? new EventItem(record, global, epoch) : new DeltaItem(record, global, epoch, merge.key, merge.delta)
}

/** A text that no delta holds, to find where a rendered frame's text goes. */
const marker = "\u0000skein-delta\u0000"
const markerJson = JSON.stringify(marker)

/** The JSON before and after the delta's text; `null` if the marker is not there exactly once. */
const templateOf = (rendered: string): { readonly head: string; readonly tail: string } | null => {
  const at = rendered.indexOf(markerJson)
  if (at < 0 || rendered.indexOf(markerJson, at + 1) >= 0) return null
  return { head: rendered.slice(0, at), tail: rendered.slice(at + markerJson.length) }
}

interface Shared {
  readonly epoch: string
  event?: SubscriberBuffer.Item
  global?: SubscriberBuffer.Item
}

/**
 * Each record's items, per format (`/event`, `/global/event`): every client
 * that follows the log is handed the same record, so its JSON and its frame's
 * bytes are made once for all of them (200 clients on one turn rendered each
 * event 200 times). Weak: a record no follower holds is forgotten with it.
 */
const shared = new WeakMap<Record, Shared>()

/** The log's record as the buffer's item, for an `/event` or `/global/event` client, shared with every other client of its format. */
export const itemOf = (global: boolean, record: Record, epoch: string): SubscriberBuffer.Item => {
  let entry = shared.get(record)
  if (entry === undefined || entry.epoch !== epoch) shared.set(record, entry = { epoch })
  if (global) return (entry.global ??= makeItem(true, record, epoch))
  return (entry.event ??= makeItem(false, record, epoch))
}

/** How much delta text a run shared by every client joins at most: within any client's frame cap but the smallest. */
export const runBytes = 16 * 1024

interface ChunkRuns {
  readonly epoch: string
  readonly records: ReadonlyArray<Record>
  event?: ReadonlyArray<PendingFrames.Group>
  global?: ReadonlyArray<PendingFrames.Group>
}

/** Each chunk the shared feed hands out, as runs per format, made once for every client it is handed to. */
const chunkRuns = new WeakMap<Chunk.Chunk<Record>, ChunkRuns>()

/**
 * The chunk's records as items, with each stretch of deltas (one session's,
 * without a gap in the log; a delta and its legacy copy interleave) joined
 * into one item per part and kind: a client adds one item per key of the
 * stretch, and a client with nothing pending writes its frame as the bytes
 * every client of its format shares.
 */
export const runsOf = (global: boolean, chunk: Chunk.Chunk<Record>, epoch: string): { readonly records: ReadonlyArray<Record>; readonly runs: ReadonlyArray<PendingFrames.Group> } => {
  let entry = chunkRuns.get(chunk)
  if (entry === undefined || entry.epoch !== epoch) chunkRuns.set(chunk, entry = { epoch, records: Chunk.toReadonlyArray(chunk) })
  const records = entry.records
  const make = () =>
    PendingFrames.coalesce(
      records.map((record) => itemOf(global, record, epoch)),
      runBytes,
      (seq, data) => encodedOf(epoch, seq, data),
      (i, j) => records[j]!.seq === records[i]!.seq + 1 && records[j]!.message.directory === records[i]!.message.directory
    )
  const runs = global ? (entry.global ??= make()) : (entry.event ??= make())
  return { records, runs }
}

/** The oldest seq an entry carries: a joined run's first. */
const firstSeq = (entry: SubscriberBuffer.Entry): number => entry._tag === "Delta" ? entry.first ?? entry.seq : entry.seq

/** Destroys the request's socket, when the server is Node's (a dead client's writes never drain). */
const destroySocket = Effect.map(Effect.serviceOption(HttpServerRequest.HttpServerRequest), (request) => () => {
  if (Option.isSome(request) && request.value.source instanceof IncomingMessage) request.value.source.socket.destroy()
})

export const stream = Effect.fn("Sse.stream")(function*(options: Options) {
  const { events } = options
  const global = options.directory === undefined
  // Lag counts only what this client gets: taken before `next`, so every record the feed may
  // count as live (seq >= start.next) is in `start.count` or counted after it.
  const filter = { directory: options.directory, canonicalOnly: options.canonicalOnly }
  const start = yield* events.published(filter)
  const next = yield* events.nextSeq
  const first = yield* Effect.orDie(events.firstSeq)
  // A cursor this log never issued (another incarnation's, or past its end) is not clamped onto
  // this log's ids: the client gets `server.resync` and this log from its start.
  const resumed = options.lastEventId === undefined
    ? Option.none<EventLog.Resume>()
    : Option.some(yield* EventLog.resume({ epoch: events.epoch, nextSeq: Effect.succeed(next) }, options.lastEventId))
  const requested = Option.match(resumed, {
    onNone: () => next,
    onSome: (r) => r._tag === "After" ? r.seq + 1 : first
  })
  const foreign = Option.flatMap(resumed, (r) => r._tag === "Resync" ? Option.some(r.reason) : Option.none())
  const from = Math.max(requested, first)
  const home = options.directory ?? ""
  const control = (type: string, properties: unknown, directory = home): SubscriberBuffer.Control => ({
    render: (cursor) => JSON.stringify(wrap(global, directory, { type, properties }, eventId(cursor)))
  })
  const render = (type: string, properties: unknown, cursor: number) => control(type, properties).render(cursor)
  const pendingAsks = yield* options.broker.pending(options.directory)
  const destroy = yield* destroySocket

  const run = Effect.gen(function*() {
    const buffer = yield* SubscriberBuffer.make({ ...options.buffer, cursor: from - 1, epoch: events.epoch })
    yield* events.track(buffer.delivered)
    yield* buffer.control(control("server.connected", {}))
    // Events between the cursor and the oldest retained one are gone: the client must reload.
    if (Option.isSome(foreign)) {
      yield* buffer.control(control("server.resync", { reason: foreign.value, from: options.lastEventId, first }))
    } else if (requested < first) {
      yield* buffer.control(control("server.resync", { reason: "retention", from: requested, first }))
    }
    for (const pending of pendingAsks) {
      const asked: Canonical.CanonicalEvent = C.event("permission.asked", pending.request)
      yield* buffer.control(control(asked.type, asked.properties, pending.directory))
    }
    // Records the feed offered since `start` (seq >= start.next, each once across re-follows).
    let received = 0
    let countedThrough = start.next - 1
    let resumeAt: number | undefined
    // The newest seq offered or skipped; `closed` once the buffer is.
    let handed = from - 1
    let closed = false
    const gets = (record: Record) =>
      (global ? options.visible?.(record.message.directory) ?? true : record.message.directory === options.directory) &&
      !(options.canonicalOnly && C.legacyEventTypes.has(record.message.payload.type))
    // Runs of deltas joined once for every client, unless this client's frames are capped smaller.
    const shape: ChunkEntries.Shape = {
      gets,
      itemOf: (record) => itemOf(global, record, events.epoch),
      runsOf: (options.buffer?.maxFrameBytes ?? 64 * 1024) >= runBytes ? (chunk) => runsOf(global, chunk, events.epoch) : undefined
    }
    // One chunk of the log in one step, offered at once. `true` to go on; `false` once full
    // (`resumeAt` set) or closed; an effect when the client's progress is to be published.
    const step = (chunk: Chunk.Chunk<Record>): boolean | Effect.Effect<boolean> => {
      const cursor = { handed, received, countedThrough }
      const joined = ChunkEntries.entriesOf(chunk, cursor, shape)
      // Interleaved items go in whole; when they do not all fit, the chunk goes record by record.
      const { entries, marks } = joined.interleaved && !buffer.fitsAll(joined.entries)
        ? ChunkEntries.entriesOf(chunk, cursor, { ...shape, runsOf: undefined })
        : joined
      const { accepted, outcome, publish } = buffer.offerAllNow(entries)
      if (accepted > 0) {
        received = marks[accepted - 1]!
        let newest = handed
        for (let i = 0; i < accepted; i++) newest = Math.max(newest, entries[i]!.seq)
        countedThrough = Math.max(countedThrough, newest)
        handed = newest
      }
      if (outcome === "full") resumeAt = firstSeq(entries[accepted]!)
      if (outcome === "closed") closed = true
      return publish === undefined ? outcome === "accepted" : Effect.as(publish, outcome === "accepted")
    }
    const stepEffect = (chunk: Chunk.Chunk<Record>): Effect.Effect<boolean> =>
      Effect.suspend(() => {
        const more = step(chunk)
        return typeof more === "boolean" ? Effect.succeed(more) : more
      })
    /**
     * Behind is the client's doing only while its buffer is full: a feed that
     * is merely slower than the log (a delta storm) reads on from disk at no
     * cost. So the lag (live events it gets, not yet offered) is judged when
     * a full buffer makes room again.
     */
    const resumeOrResync = (at: number): Effect.Effect<void> =>
      Effect.flatMap(events.published(filter), (now) => {
        const lag = now.count - start.count - received
        return lag > options.maxLag
          ? Effect.asVoid(buffer.resync((cursor) => render("server.resync", { reason: "slow client", behind: lag }, cursor)))
          : feed(at)
      })
    /**
     * Follows the log while the buffer takes: on its own until it holds what
     * the server's shared feed has handed out, then attached to that feed.
     * When the buffer is full it lets go of the log (a stalled client holds
     * no subscription) and follows again from the same event once there is room.
     */
    const feed = (at: number): Effect.Effect<void> =>
      Effect.suspend(() => {
        resumeAt = undefined
        handed = at - 1
        const attached = events.live.tryAttach(handed, step)
        if (attached !== undefined) return Effect.zipRight(attached, released)
        let waiting: Effect.Effect<void> | undefined
        // Whether this feed let go of the log itself (full, closed, or attached to the shared feed).
        let letGo = false
        return events.follow(at).pipe(
          Stream.orDie,
          Stream.chunks,
          // takeWhile, not runForEachWhile: with the latter a stalled client's heap grew with the log.
          Stream.mapEffect((records) =>
            Effect.map(stepEffect(records), (more) => {
              waiting = more ? events.live.tryAttach(handed, step) : undefined
              letGo = !more || waiting !== undefined
              return !letGo
            })
          ),
          Stream.takeWhile((more) => more),
          Stream.runDrain,
          // A follow that ended on its own is a log that has closed: following it again would only spin.
          Effect.zipRight(Effect.suspend(() => !letGo ? Effect.void : waiting === undefined ? released : Effect.zipRight(waiting, released)))
        )
      })
    /** Let go of the log: full (wait for room), closed (done), or the shared feed ended (follow alone). */
    const released: Effect.Effect<void> = Effect.suspend(() => {
      const at = resumeAt
      if (at !== undefined) return Effect.zipRight(buffer.awaitRoom, resumeOrResync(at))
      return closed ? Effect.void : feed(handed + 1)
    })
    const heartbeat = Effect.flatMap(buffer.tick, (state) =>
      state === "live"
        ? buffer.control({ ...control("server.heartbeat", {}), kind: "heartbeat" })
        : Effect.zipRight(buffer.resync((cursor) => render("server.resync", { reason: "stalled" }, cursor)), Effect.sync(destroy))
    ).pipe(Effect.repeat(Schedule.spaced(Duration.decode(options.heartbeat))), Effect.delay(options.heartbeat))
    yield* Effect.forkScoped(feed(from))
    yield* Effect.forkScoped(heartbeat)
    if (options.until !== undefined) yield* Effect.forkScoped(Effect.zipRight(options.until, buffer.end))
    const end = Effect.fail(Option.none())
    return Stream.repeatEffectOption(Effect.flatMap(buffer.takeBytes, Option.match({ onNone: () => end, onSome: Effect.succeed })))
  })
  return Stream.unwrapScoped(run)
})
