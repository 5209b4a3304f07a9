/**
 * The CLI's stdout as a pull: each call returns the events of the next read,
 * and fails with `None` once stdout ended and its last line was decoded. The
 * reader loops over it for the life of the session. A pull rather than a
 * stream, because a stream's executors cost a session more memory than all
 * else it holds while idle.
 */
import { type CliMessage, type Lenient, StreamJson } from "@skein/protocol"
import { Chunk, Effect, Option } from "effect"

export type Decoded = Lenient.Decoded<CliMessage.CliMessage>

/** The Effect idiom of a pull: a non-empty chunk, or `None` at the end. */
export type Pull<A> = Effect.Effect<Chunk.Chunk<A>, Option.Option<never>>

const end = Effect.fail(Option.none())

/** Decodes the chunks `bytes` returns, skipping reads that complete no line. */
export const decoded = (bytes: Pull<Uint8Array>): Pull<Decoded> => {
  const decoder = StreamJson.stdoutDecoder()
  let ended = false
  const next: Pull<Decoded> = Effect.suspend(() => {
    if (ended) return end
    return Effect.matchEffect(bytes, {
      onFailure: () => {
        ended = true
        const rest = decoder.end()
        return rest.length === 0 ? end : Effect.succeed(Chunk.unsafeFromArray(rest))
      },
      onSuccess: (chunks) => {
        const out: Array<Decoded> = []
        for (const chunk of chunks) for (const event of decoder.push(chunk)) out.push(event)
        return out.length === 0 ? next : Effect.succeed(Chunk.unsafeFromArray(out))
      }
    })
  })
  return next
}

/** `first`, then what `rest` returns. */
export const prefixed = <A>(first: Chunk.Chunk<A>, rest: Pull<A>): Pull<A> => {
  let pending = Chunk.isEmpty(first) ? undefined : first
  return Effect.suspend(() => {
    if (pending === undefined) return rest
    const out = pending
    pending = undefined
    return Effect.succeed(out)
  })
}

/** Runs `f` on every chunk until the pull ends. */
export const forEachChunk = <A, R>(pull: Pull<A>, f: (chunk: Chunk.Chunk<A>) => Effect.Effect<void, never, R>) =>
  Effect.flatMap(pull, f).pipe(Effect.forever, Effect.catchAll(() => Effect.void))
