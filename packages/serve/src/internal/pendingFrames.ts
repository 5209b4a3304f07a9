/**
 * The frames one SSE subscriber has not taken yet, within its caps, and
 * their SSE text. Synchronous and free of Effect: `subscriberBuffer` owns the
 * waiting, this owns what waits.
 *
 * A delta joins the pending delta of the same part and field (found within
 * `mergeWindow` frames back, never across another kind of frame) instead of
 * queueing, so a slow client gets fewer, larger frames. A run of deltas
 * joined once for every client stays a frame of its own (its bytes shared)
 * until the client has `mergeWindow` frames pending.
 */

/**
 * What every client of one format shares for an event, rendered once (see
 * `sse.ts`): the UTF-8 size of `data`, and the bytes of the event's frame
 * alone (`id: <epoch>-<seq>`, `data:`), written as they are to each client
 * whose frame it is.
 */
export interface Encoded {
  readonly size: number
  readonly frame: Uint8Array
}

/** One logged event for the client. */
export interface Event {
  readonly _tag: "Event"
  readonly seq: number
  /** The JSON of the frame's `data:`. */
  readonly data: string
  readonly encoded?: Encoded | undefined
}

/** A delta of one part's field: mergeable with the pending delta of the same `key`. */
export interface Delta {
  readonly _tag: "Delta"
  /** The newest event it carries. */
  readonly seq: number
  /** The oldest event it carries, when it carries a run of them (see `joinDeltas`); else `seq`. */
  readonly first?: number | undefined
  readonly key: string
  readonly delta: string
  /** `render(seq, delta)` for the delta alone; read only when it starts a frame of its own. */
  readonly data: string
  /** The frame's JSON for a merged run: the newest event's fields, the run's text. */
  readonly render: (seq: number, delta: string) => string
  readonly encoded?: Encoded | undefined
  /** The UTF-8 size of `delta`, when shared by every client (else measured here). */
  readonly deltaBytes?: number | undefined
}

export type Item = Event | Delta

/** A frame that is not a logged event (`server.*`): it carries the cursor the client holds. */
export interface Control {
  readonly render: (cursor: number) => string
  /** At most one pending frame of this kind (heartbeats). */
  readonly kind?: string | undefined
}

export interface Caps {
  readonly maxEvents: number
  readonly maxBytes: number
  readonly maxFrameBytes: number
  readonly mergeWindow: number
}

export interface Frame {
  /** The oldest seq this frame carries (`undefined`: a control frame). */
  readonly first: number | undefined
  seq: number | undefined
  key: string | undefined
  deltas: Array<string>
  data: string
  bytes: number
  /** The newest delta merged in: it renders a merged run's frame (`render`, called on it). */
  source: Delta | undefined
  readonly control: Control | undefined
  /** The event's shared bytes, while the frame holds that one event alone. */
  encoded: Encoded | undefined
}

export const byteLength = (text: string) => Buffer.byteLength(text, "utf8")

/** The pending frame the delta may join: the newest of its key in the window, if the caps leave room. */
export const mergeTarget = (
  frames: ReadonlyArray<Frame>,
  item: Delta,
  caps: Caps,
  pendingBytes: number
): Frame | undefined => {
  const bound = Math.max(0, frames.length - caps.mergeWindow)
  for (let i = frames.length - 1; i >= bound; i--) {
    const frame = frames[i]!
    // A run of deltas only: no merge across an event, a heartbeat or a resync.
    if (frame.key === undefined) return undefined
    if (frame.key !== item.key) continue
    const extra = item.deltaBytes ?? byteLength(item.delta)
    return frame.bytes + extra > caps.maxFrameBytes || pendingBytes + extra > caps.maxBytes ? undefined : frame
  }
  return undefined
}

/** Whether a new frame of `size` bytes fits: always when nothing is pending, so one oversized event still goes. */
export const fits = (caps: Caps, events: number, bytes: number, size: number) =>
  events === 0 || (events < caps.maxEvents && bytes + size <= caps.maxBytes)

export const frameOf = (item: Item, size: number): Frame => ({
  first: item._tag === "Delta" ? item.first ?? item.seq : item.seq,
  seq: item.seq,
  key: item._tag === "Delta" ? item.key : undefined,
  deltas: item._tag === "Delta" ? [item.delta] : [],
  data: item.data,
  bytes: size,
  source: item._tag === "Delta" ? item : undefined,
  control: undefined,
  encoded: item.encoded
})

/** A frame's `data:` JSON: a lone event's as rendered, a merged run's rendered now. */
const dataOf = (frame: Frame): string => {
  if (frame.deltas.length > 1 && frame.source !== undefined && frame.seq !== undefined) return frame.source.render(frame.seq, frame.deltas.join(""))
  return frame.data
}

export const controlFrame = (control: Control): Frame => ({
  first: undefined,
  seq: undefined,
  key: undefined,
  deltas: [],
  data: "",
  bytes: 0,
  source: undefined,
  control,
  encoded: undefined
})

/**
 * Deltas of one key that follow each other in the log (seqs without a gap),
 * as one item carrying them all: from the oldest's seq to the newest's, their
 * text joined, rendered with the newest's fields. Made once per chunk of the
 * log and shared by every client that gets them, so a client adds one item
 * for the run instead of one per event; `encode` gives its shared frame bytes.
 */
export const joinDeltas = (
  deltas: ReadonlyArray<Delta>,
  encode: (seq: number, data: string) => Encoded
): Delta => {
  const oldest = deltas[0]!
  if (deltas.length === 1) return oldest
  const newest = deltas[deltas.length - 1]!
  let bytes = 0
  for (const d of deltas) bytes += d.deltaBytes ?? byteLength(d.delta)
  const delta = deltas.map((d) => d.delta).join("")
  let data: string | undefined
  let encoded: Encoded | undefined
  return {
    _tag: "Delta",
    seq: newest.seq,
    first: oldest.first ?? oldest.seq,
    key: newest.key,
    delta,
    deltaBytes: bytes,
    get data() {
      return (data ??= newest.render(newest.seq, delta))
    },
    get encoded() {
      return (encoded ??= encode(newest.seq, this.data))
    },
    render: (seq, text) => newest.render(seq, text)
  }
}

/** One item of a group: the events it carries and where the first of them is in the chunk. */
export interface Joined {
  readonly item: Item
  /** How many of the chunk's items it carries. */
  readonly count: number
  /** The index of its first item in the chunk. */
  readonly at: number
}

/** A stretch of one chunk, `[start, end)`, as one item per key (ordered by their first event). */
export interface Group {
  readonly joined: ReadonlyArray<Joined>
  readonly start: number
  readonly end: number
}

/**
 * The items of one chunk of the log in groups: each stretch of deltas (of up
 * to `maxKeys` keys, interleaved as a delta and its legacy copy are) becomes
 * one item per key (`joinDeltas`), a key's text growing to `maxBytes` at
 * most; any other item is a group of its own. `joins` says whether the next
 * item may join the stretch before it (the caller's rules: the same
 * session, no gap in the log).
 */
export const coalesce = (
  items: ReadonlyArray<Item>,
  maxBytes: number,
  encode: (seq: number, data: string) => Encoded,
  joins: (previous: number, next: number) => boolean = () => true,
  maxKeys = 4
): Array<Group> => {
  const out: Array<Group> = []
  let i = 0
  while (i < items.length) {
    const head = items[i]!
    if (head._tag !== "Delta") {
      out.push({ joined: [{ item: head, count: 1, at: i }], start: i, end: i + 1 })
      i++
      continue
    }
    const keys = new Map<string, { deltas: Array<Delta>; bytes: number; at: number }>()
    let j = i
    while (j < items.length) {
      const next = items[j]!
      if (next._tag !== "Delta" || (j > i && !joins(j - 1, j))) break
      const key = keys.get(next.key)
      if (key === undefined && keys.size >= maxKeys) break
      const size = next.deltaBytes ?? byteLength(next.delta)
      if (key !== undefined && key.bytes + size > maxBytes) break
      if (key === undefined) keys.set(next.key, { deltas: [next], bytes: size, at: j })
      else {
        key.deltas.push(next)
        key.bytes += size
      }
      j++
    }
    const joined = Array.from(keys.values(), (k): Joined => ({ item: joinDeltas(k.deltas, encode), count: k.deltas.length, at: k.at }))
    out.push({ joined, start: i, end: j })
    i = j
  }
  return out
}

const decoder = new TextDecoder()
const encoder = new TextEncoder()

/**
 * The frames as SSE text, after the client's `cursor`, and the cursor after
 * them. A frame's `id:` is the log's epoch and the highest seq such that every event up to it
 * is in a frame written by then: a merged delta carries events from later in
 * the log than the frames after it, which raise the id only once they are
 * written too. Control frames carry the cursor as it is.
 */
export const render = (
  frames: ReadonlyArray<Frame>,
  cursor: number,
  epoch: string
): { readonly text: string; readonly cursor: number } => {
  let text = ""
  const after = renderWith(frames, cursor, epoch, (part) => {
    text += typeof part === "string" ? part : decoder.decode(part)
  })
  return { text, cursor: after }
}

/**
 * `render` as bytes, for the socket: a lone event whose frame carries its
 * own seq as id (a client that keeps up: every frame) is written as the
 * bytes every client of its format shares; the rest is encoded here.
 */
export const renderBytes = (
  frames: ReadonlyArray<Frame>,
  cursor: number,
  epoch: string
): { readonly bytes: Uint8Array; readonly cursor: number } => {
  const parts: Array<Uint8Array> = []
  let text = ""
  const after = renderWith(frames, cursor, epoch, (part) => {
    if (typeof part === "string") {
      text += part
      return
    }
    if (text !== "") parts.push(encoder.encode(text))
    text = ""
    parts.push(part)
  })
  if (text !== "") parts.push(encoder.encode(text))
  return { bytes: parts.length === 1 ? parts[0]! : Buffer.concat(parts), cursor: after }
}

/** The frames in order, as text or shared bytes, to `emit`; returns the cursor after them. */
const renderWith = (
  frames: ReadonlyArray<Frame>,
  cursor: number,
  epoch: string,
  emit: (part: string | Uint8Array) => void
): number => {
  // later[i]: the oldest seq carried by a frame after i.
  const later = new Array<number>(frames.length + 1)
  later[frames.length] = Number.POSITIVE_INFINITY
  for (let i = frames.length - 1; i >= 0; i--) later[i] = Math.min(frames[i]!.first ?? Number.POSITIVE_INFINITY, later[i + 1]!)
  let newest = cursor
  for (let i = 0; i < frames.length; i++) {
    const frame = frames[i]!
    if (frame.control !== undefined) {
      emit(`id: ${epoch}-${cursor}\ndata: ${frame.control.render(cursor)}\n\n`)
      continue
    }
    newest = Math.max(newest, frame.seq ?? newest)
    const safe = Math.min(newest, later[i + 1]! - 1)
    if (safe > cursor && safe === frame.seq && frame.deltas.length <= 1 && frame.encoded !== undefined) {
      cursor = safe
      emit(frame.encoded.frame)
    } else if (safe > cursor) {
      cursor = safe
      emit(`id: ${epoch}-${safe}\ndata: ${dataOf(frame)}\n\n`)
    } else {
      emit(`data: ${dataOf(frame)}\n\n`)
    }
  }
  return cursor
}

export interface PendingFrames {
  /** Merges or queues the item: `false` when it does not fit. */
  readonly add: (item: Item) => boolean
  /** Whether every item fits, each as a frame of its own (so as merged too): the caps leave room for all of them. */
  readonly fitsAll: (items: ReadonlyArray<Item>) => boolean
  /** Queues a control frame past the caps; at most one of a `kind`. */
  readonly control: (control: Control) => void
  /** Everything pending, oldest first; the queue is empty after. */
  readonly drain: () => ReadonlyArray<Frame>
  readonly clear: () => void
  readonly size: () => number
  readonly stats: () => { readonly events: number; readonly bytes: number; readonly coalesced: number }
}

export const make = (caps: Caps): PendingFrames => {
  let frames: Array<Frame> = []
  let events = 0
  let bytes = 0
  let coalesced = 0

  const merge = (item: Delta): boolean => {
    // A run joined once for every client (`joinDeltas`) stays a frame of its own while the client
    // keeps up (fewer frames pending than the merge window): its JSON and bytes are shared, where
    // a merge renders a frame for this client alone (200 clients on one turn each rendered the
    // same runs, joined across the chunks that came within their take window). Behind, it merges.
    if (item.first !== undefined && item.first !== item.seq && frames.length < caps.mergeWindow) return false
    const frame = mergeTarget(frames, item, caps, bytes)
    if (frame === undefined) return false
    const extra = item.deltaBytes ?? byteLength(item.delta)
    frame.deltas.push(item.delta)
    frame.seq = item.seq
    frame.source = item
    frame.encoded = undefined
    frame.bytes += extra
    bytes += extra
    coalesced++
    return true
  }

  const clear = () => {
    frames = []
    events = 0
    bytes = 0
  }

  return {
    add: (item) => {
      if (item._tag === "Delta" && merge(item)) return true
      const size = item.encoded?.size ?? byteLength(item.data)
      if (!fits(caps, events, bytes, size)) return false
      frames.push(frameOf(item, size))
      events++
      bytes += size
      return true
    },
    fitsAll: (items) => {
      let size = 0
      for (const item of items) {
        size += Math.max(item.encoded?.size ?? byteLength(item.data), item._tag === "Delta" ? item.deltaBytes ?? byteLength(item.delta) : 0)
      }
      return events + items.length <= caps.maxEvents && bytes + size <= caps.maxBytes
    },
    control: (control) => {
      if (control.kind !== undefined && frames.some((frame) => frame.control?.kind === control.kind)) return
      frames.push(controlFrame(control))
    },
    drain: () => {
      const all = frames
      clear()
      return all
    },
    clear,
    size: () => frames.length,
    stats: () => ({ events, bytes, coalesced })
  }
}
