/**
 * Following an event log: the records on disk from a seq, then each new
 * append as it is published, with no gap and no duplicate. A follower whose
 * buffer slid past records it had not taken refills them from disk.
 */
import { Effect, PubSub, Stream } from "effect"
import type { Record } from "../EventLog.js"
import type { EventLogError } from "./eventLogError.js"

export const follow = <A>(options: {
  /** Held by appends while they write and publish. */
  readonly lock: Effect.Semaphore
  /** Every appended record, once written. */
  readonly pubsub: PubSub.PubSub<Record<A>>
  /** The seq the next append gets; read under the lock. */
  readonly nextSeq: () => number
  /** Records with `from <= seq < end` from disk. */
  readonly read: (from: number, end: number) => Stream.Stream<Record<A>, EventLogError>
  readonly from: number
}): Stream.Stream<Record<A>, EventLogError> =>
  Stream.unwrapScoped(Effect.gen(function*() {
    // Subscribing and reading the end under the lock: every record after
    // `end` reaches the subscription, every record before it is on disk.
    const { end, subscription } = yield* options.lock.withPermits(1)(
      Effect.map(PubSub.subscribe(options.pubsub), (subscription) => ({ subscription, end: options.nextSeq() }))
    )
    let last = options.from - 1
    const emit = (stream: Stream.Stream<Record<A>, EventLogError>) =>
      stream.pipe(
        Stream.filter((record) => record.seq > last),
        Stream.tap((record) =>
          Effect.sync(() => {
            last = record.seq
          })
        )
      )
    const live = Stream.fromQueue(subscription).pipe(
      // `last` is read when the record's turn comes, not when it is dequeued: a batch is
      // dequeued at once, and its records must not each look like a gap to refill from disk.
      Stream.flatMap((record) =>
        Stream.suspend(() => {
          if (record.seq <= last) return Stream.empty
          if (record.seq === last + 1) return emit(Stream.make(record))
          return emit(Stream.concat(options.read(last + 1, record.seq), Stream.make(record)))
        }), { concurrency: 1 })
    )
    return Stream.concat(emit(options.read(options.from, end)), live)
  }))
