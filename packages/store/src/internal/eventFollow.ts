/**
 * Following an event log: the records on disk from a seq, then each new
 * append as it is published, with no gap and no duplicate. A follower whose
 * buffer slid past records it had not taken refills them from disk.
 */
import { Chunk, Effect, PubSub, Stream } from "effect"
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
    // Whole chunks, not a record per step: a chunk is what a follower reads per wake-up.
    const emit = (stream: Stream.Stream<Record<A>, EventLogError>) =>
      Stream.mapChunks(stream, (chunk) => {
        const fresh: Array<Record<A>> = []
        for (const record of chunk) {
          if (record.seq <= last) continue
          fresh.push(record)
          last = record.seq
        }
        return Chunk.unsafeFromArray(fresh)
      })
    // A batch is dequeued at once: its records that follow on go out together, and
    // at a gap (the subscription slid past records) the missing range is read from disk.
    const live = Stream.fromQueue(subscription).pipe(
      Stream.chunks,
      Stream.flatMap((batch) =>
        Stream.suspend(() => {
          const parts: Array<Stream.Stream<Record<A>, EventLogError>> = []
          let run: Array<Record<A>> = []
          let at = last
          for (const record of batch) {
            if (record.seq <= at) continue
            if (record.seq !== at + 1) {
              if (run.length > 0) parts.push(Stream.fromIterable(run))
              run = []
              parts.push(options.read(at + 1, record.seq))
            }
            run.push(record)
            at = record.seq
          }
          if (run.length > 0) parts.push(Stream.fromIterable(run))
          return emit(Stream.concatAll(Chunk.unsafeFromArray(parts)))
        }), { concurrency: 1 })
    )
    return Stream.concat(emit(options.read(options.from, end)), live)
  }))
