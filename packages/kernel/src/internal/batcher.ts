/**
 * Group commit: requests that arrive while a batch runs, or in the same tick
 * as the first, are served together by the next run.
 *
 * A scope close ends many children at once. Each one's release sweeps /proc
 * for its escapees and rewrites the journal; batched, the close costs one
 * sweep and one write, however many children it ends.
 */
import { Deferred, Effect, Exit, Queue, type Scope } from "effect"

export interface Batcher<A, B> {
  /** Waits for the run that serves `input`. */
  readonly submit: (input: A) => Effect.Effect<B>
}

interface Pending<A, B> {
  readonly input: A
  readonly done: Deferred.Deferred<B>
}

export interface Options {
  /**
   * Runs once a batch has its first request, before the batch is closed:
   * waits for the requests known to be on their way (see processHost.ts).
   */
  readonly gather?: Effect.Effect<void> | undefined
}

/**
 * `run` answers a batch in order. Once the scope closes, requests run one by
 * one in the caller's fiber, so a late release still finishes its work.
 */
export const make = <A, B>(
  run: (batch: ReadonlyArray<A>) => Effect.Effect<ReadonlyArray<B>>,
  options?: Options
): Effect.Effect<Batcher<A, B>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const queue = yield* Queue.unbounded<Pending<A, B>>()
    let closed = false

    const serve = (batch: ReadonlyArray<Pending<A, B>>) =>
      Effect.flatMap(Effect.exit(run(batch.map((p) => p.input))), (exit) =>
        Effect.forEach(batch, (pending, i) =>
          Deferred.done(
            pending.done,
            Exit.map(exit, (results) => results[i]!)
          ), { discard: true }))

    const loop = Effect.gen(function*() {
      const first = yield* Queue.take(queue)
      // Let the fibers woken in the same tick join this batch.
      yield* Effect.yieldNow()
      if (options?.gather !== undefined) yield* options.gather
      const rest = yield* Queue.takeAll(queue)
      yield* Effect.uninterruptible(serve([first, ...rest]))
    }).pipe(Effect.forever)

    // Runs after the loop is interrupted (finalizers run in reverse order).
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        closed = true
        return Effect.flatMap(Queue.takeAll(queue), (left) => left.length === 0 ? Effect.void : serve(Array.from(left)))
      })
    )
    // Interruptible even when made in a finalizer (a reap on close): a fiber
    // inherits its parent's interruptibility, and the scope must stop it.
    yield* Effect.forkScoped(Effect.interruptible(loop))

    const submit = (input: A): Effect.Effect<B> =>
      Effect.flatMap(Deferred.make<B>(), (done) =>
        Effect.suspend(() => {
          if (closed) return Effect.map(run([input]), (results) => results[0]!)
          queue.unsafeOffer({ input, done })
          return Deferred.await(done)
        }))
    return { submit }
  })
