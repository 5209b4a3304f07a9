/**
 * NDJSON framing for the stream-json bus.
 *
 * The platform's `Ndjson.unpack` decodes each chunk as text on its own, which
 * corrupts a UTF-8 character split across two chunks; this framer works on
 * bytes and is safe for any chunking.
 */
import * as Channel from "effect/Channel"
import * as Chunk from "effect/Chunk"
import { dual } from "effect/Function"
import * as Predicate from "effect/Predicate"
import * as Stream from "effect/Stream"
import { LineFramer } from "./internal/lineFramer.js"

/** One non-blank line of input, without its `\n` or `\r\n`. `line` counts from 1, blank lines included. */
export interface Line {
  readonly _tag: "Line"
  readonly line: number
  readonly text: string
}

/** A line longer than the limit: reported, not buffered. */
export interface Oversized {
  readonly _tag: "Oversized"
  readonly line: number
  readonly bytes: number
  readonly limit: number
}

export type Frame = Line | Oversized

export interface FrameOptions {
  /** Longest line kept, in bytes. Default 64 MiB. */
  readonly maxLineBytes?: number | undefined
}

export const defaultMaxLineBytes = 64 * 1024 * 1024

/**
 * Frame a byte stream into lines. A final line without a newline is emitted at
 * end of input; blank lines are skipped but counted.
 */
export const frames: {
  (options?: FrameOptions): <E, R>(self: Stream.Stream<Uint8Array, E, R>) => Stream.Stream<Frame, E, R>
  <E, R>(self: Stream.Stream<Uint8Array, E, R>, options?: FrameOptions): Stream.Stream<Frame, E, R>
} = dual(
  (args) => Predicate.hasProperty(args[0], Stream.StreamTypeId),
  <E, R>(self: Stream.Stream<Uint8Array, E, R>, options?: FrameOptions): Stream.Stream<Frame, E, R> =>
    mapFrames(self, (frame) => frame, options)
)

/** A framer fed bytes a read at a time, mapping each frame as it completes. */
export interface Incremental<A> {
  /** What the lines these bytes complete map to, in order. */
  readonly push: (bytes: Uint8Array) => Array<A>
  /** At the end of input: what a last line without a newline maps to. */
  readonly end: () => Array<A>
}

export const incremental = <A>(f: (frame: Frame) => A, options?: FrameOptions): Incremental<A> => {
  const framer = new LineFramer(options?.maxLineBytes ?? defaultMaxLineBytes)
  const frames: Array<Frame> = []
  const drain = () => {
    const out = frames.map(f)
    frames.length = 0
    return out
  }
  return {
    push: (bytes) => {
      framer.push(bytes, frames)
      return drain()
    },
    end: () => {
      framer.end(frames)
      return drain()
    }
  }
}

/**
 * Frame a byte stream and map each frame in the same pass, which saves a
 * stream stage per line on the decode hot path. One channel reads the input
 * and, at its end, flushes a last line without a newline: a `concat` for the
 * flush ran two more channel executors for the life of every session's
 * stdout.
 */
export const mapFrames = <A, E, R>(
  self: Stream.Stream<Uint8Array, E, R>,
  f: (frame: Frame) => A,
  options?: FrameOptions
): Stream.Stream<A, E, R> =>
  Stream.suspend(() => {
    const framer = incremental(f, options)
    const loop: Channel.Channel<Chunk.Chunk<A>, Chunk.Chunk<Uint8Array>, E, E, unknown, unknown> = Channel.readWithCause({
      onInput: (chunks: Chunk.Chunk<Uint8Array>) => {
        const out: Array<A> = []
        for (const chunk of chunks) for (const a of framer.push(chunk)) out.push(a)
        return out.length === 0 ? loop : Channel.zipRight(Channel.write(Chunk.unsafeFromArray(out)), loop)
      },
      onFailure: Channel.failCause,
      onDone: () => {
        const rest = framer.end()
        return rest.length === 0 ? Channel.void : Channel.write(Chunk.unsafeFromArray(rest))
      }
    })
    return Stream.pipeThroughChannel(self, loop)
  })

/**
 * Frame a whole buffer at once, for files already in memory and for tests.
 */
export const framesOf = (bytes: Uint8Array, options?: FrameOptions): ReadonlyArray<Frame> => {
  const framer = new LineFramer(options?.maxLineBytes ?? defaultMaxLineBytes)
  const out: Array<Frame> = []
  framer.push(bytes, out)
  framer.end(out)
  return out
}

const encoder = new TextEncoder()

/** One JSON value per line. `JSON.stringify` escapes raw newlines, so a value never spans lines. */
export const encodeLine = (value: unknown): string => JSON.stringify(value) + "\n"

/** Encode a stream of JSON values as NDJSON bytes. */
export const pack = <A, E, R>(self: Stream.Stream<A, E, R>): Stream.Stream<Uint8Array, E, R> =>
  Stream.map(self, (value) => encoder.encode(encodeLine(value)))
