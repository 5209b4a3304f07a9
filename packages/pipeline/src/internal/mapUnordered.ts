/**
 * `Stream.mapEffect(f, { concurrency, unordered: true })` with less work per
 * element. Effect's version merges each element in as an inner stream (a
 * channel and its executor per element); here each element is one fiber of
 * a FiberSet, and its output goes to a mailbox the stream reads.
 *
 * The same contract: at most `concurrency` elements in flight, outputs as
 * they complete; the first failure, of an element or of the input, starts
 * no new element and fails the stream, and the stream's end (its failure, or
 * a reader that stops) interrupts every element still in flight and waits
 * for it.
 */
import { type Cause, Effect, FiberSet, Mailbox, Stream } from "effect"

export const mapUnordered = <A, B, E, R, E2, R2>(
  self: Stream.Stream<A, E, R>,
  f: (a: A) => Effect.Effect<B, E2, R2>,
  concurrency: number
): Stream.Stream<B, E | E2, R | R2> =>
  Stream.unwrapScoped(Effect.gen(function*() {
    // Bounded: an output nobody reads yet holds its element's slot.
    const outputs = yield* Mailbox.make<B, E | E2>(concurrency)
    const slots = yield* Effect.makeSemaphore(concurrency)
    const running = yield* FiberSet.make<boolean>()
    let failed = false
    const fail = (cause: Cause.Cause<E | E2>) =>
      Effect.suspend(() => {
        failed = true
        return outputs.failCause(cause)
      })
    const one = (a: A) =>
      f(a).pipe(
        Effect.flatMap((b) => outputs.offer(b)),
        Effect.catchAllCause(fail),
        Effect.ensuring(slots.release(1))
      )
    // Each element waits for a slot; once anything failed, the input is read no further.
    const feed = Stream.runForEachWhile(self, (a) =>
      Effect.zipRight(
        slots.take(1),
        Effect.suspend(() => failed ? Effect.as(slots.release(1), false) : Effect.as(FiberSet.run(running, one(a)), true))
      ))
    yield* Effect.forkScoped(feed.pipe(
      // Every slot back: every element has ended.
      Effect.zipRight(slots.take(concurrency)),
      Effect.matchCauseEffect({
        onFailure: fail,
        onSuccess: () => Effect.suspend(() => failed ? Effect.void : outputs.end)
      })
    ))
    return Mailbox.toStream(outputs)
  }))
