/**
 * A child's stdout as a pull: each call takes what the pipe's buffer holds,
 * waiting for it when empty. A pull instead of a stream for readers that live
 * as long as their child (a session's): the stream over the same pipe ran a
 * fiber's worth of channel executors for the whole life of the child, about
 * 20 KB of heap per idle session.
 */
import { Chunk, Effect, Option } from "effect"
import type { Readable } from "node:stream"

export type Pull = Effect.Effect<Chunk.Chunk<Uint8Array>, Option.Option<never>>

/** Reads `readable` (kept paused: a 'readable' listener is attached) until it ends or fails. */
export const pull = (readable: Readable, onError: (error: Error) => Effect.Effect<void>): Pull => {
  let ended = false
  let failure: Error | undefined
  const latch = Effect.unsafeMakeLatch(false)
  readable.on("readable", () => latch.unsafeOpen())
  readable.on("end", () => {
    ended = true
    latch.unsafeOpen()
  })
  readable.on("close", () => {
    ended = true
    latch.unsafeOpen()
  })
  readable.on("error", (error) => {
    failure ??= error
    ended = true
    latch.unsafeOpen()
  })
  const done: Pull = Effect.suspend(() => {
    const error = failure
    failure = undefined
    return error === undefined ? Effect.fail(Option.none()) : Effect.zipRight(onError(error), Effect.fail(Option.none()))
  })
  const next: Pull = Effect.suspend(() => {
    const chunks: Array<Uint8Array> = []
    for (let item: Buffer | null = readable.read(); item !== null; item = readable.read()) {
      chunks.push(new Uint8Array(item.buffer, item.byteOffset, item.byteLength))
    }
    if (chunks.length > 0) return Effect.succeed(Chunk.unsafeFromArray(chunks))
    if (ended) return done
    latch.unsafeClose()
    return Effect.zipRight(latch.await, next)
  })
  return next
}
