import { expect } from "@effect/vitest"
import { SqlEventLog, SqlStore, StoreUrl } from "@skein/sql"
import { EventLog } from "@skein/store"
import { Chunk, Effect, Fiber, Schema, Stream } from "effect"
import { Backing, onBoth } from "./backings.js"

const Message = Schema.Struct({ type: Schema.String, n: Schema.Number })
const msg = (n: number) => ({ type: "event", n })
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i)
const seqs = (records: Chunk.Chunk<EventLog.Record<unknown>>) => Chunk.toReadonlyArray(records).map((r) => r.seq)

/** Opens the log `name` over its own connection to `url`, in the current scope: one "process". */
const openLog = (url: string, name = "serve") =>
  Effect.flatMap(Effect.flatMap(StoreUrl.parse(url), (parsed) => SqlStore.make(parsed)), (store) =>
    SqlEventLog.open({ name, schema: Message, pollInterval: "20 millis" }).pipe(Effect.provideService(SqlStore.SqlStore, store)))


onBoth((it, name) => {
  it.scoped(`${name}: seq survives a process restart and replays exactly once`, () =>
    Effect.gen(function*() {
      const url = yield* (yield* Backing).fresh
      const epoch = yield* Effect.scoped(Effect.gen(function*() {
        const log = yield* openLog(url)
        expect(yield* log.nextSeq).toBe(1)
        expect((yield* log.append(msg(0))).seq).toBe(1)
        expect((yield* log.appendAll([msg(1), msg(2)])).map((r) => r.seq)).toEqual([2, 3])
        return log.epoch
      }))
      const log = yield* openLog(url)
      expect(log.epoch).toBe(epoch)
      expect(yield* log.nextSeq).toBe(4)
      expect((yield* log.append(msg(3))).seq).toBe(4)
      // A client that saw seq 2 before the restart gets 3 and 4, once each.
      const resume = yield* EventLog.resume(log, EventLog.cursor(epoch, 2))
      expect(resume).toEqual({ _tag: "After", seq: 2 })
      const replay = yield* Stream.runCollect(log.follow(3).pipe(Stream.take(2)))
      expect(seqs(replay)).toEqual([3, 4])
      expect(Chunk.toReadonlyArray(replay).map((r) => r.message.n)).toEqual([2, 3])
      expect(seqs(yield* Stream.runCollect(log.read(1)))).toEqual([1, 2, 3, 4])
      expect(seqs(yield* Stream.runCollect(log.read(2, 4)))).toEqual([2, 3])
    }))

  it.scoped(`${name}: followers get every append live, in another process too, with no gap or duplicate`, () =>
    Effect.gen(function*() {
      const url = yield* (yield* Backing).fresh
      const writer = yield* openLog(url)
      const reader = yield* openLog(url)
      for (let i = 0; i < 10; i++) yield* writer.append(msg(i))
      const total = 300
      const local = yield* Effect.fork(Stream.runCollect(Stream.take(writer.follow(1), total)))
      const remote = yield* Effect.fork(Stream.runCollect(Stream.take(reader.follow(5), total - 4)))
      yield* Effect.forEach(range(10, total), (i) => writer.append(msg(i)), { discard: true })
      expect(seqs(yield* Fiber.join(local))).toEqual(range(1, total + 1))
      expect(seqs(yield* Fiber.join(remote))).toEqual(range(5, total + 1))
    }))

  it.scoped(`${name}: two writers' appends, some too large to ride their NOTIFY, reach both writers' followers once each, in seq order, as the table has them`, () =>
    Effect.gen(function*() {
      const url = yield* (yield* Backing).fresh
      const a = yield* openLog(url)
      const b = yield* openLog(url)
      const rounds = 60
      const total = rounds * 3
      const followA = yield* Effect.fork(Stream.runCollect(Stream.take(a.follow(1), total)))
      const followB = yield* Effect.fork(Stream.runCollect(Stream.take(b.follow(1), total)))
      // Every seventh message is over a NOTIFY's 8000 bytes: followers elsewhere read it from the table.
      const message = (n: number) => ({ type: n % 7 === 0 ? "x".repeat(9000) : "event", n })
      yield* Effect.forEach(range(0, rounds), (i) =>
        Effect.all([a.append(message(3 * i)), b.appendAll([message(3 * i + 1), message(3 * i + 2)])], { concurrency: 2 }), { discard: true })
      const table = Chunk.toReadonlyArray(yield* Stream.runCollect(a.read(1, total + 1)))
      expect(table.map((r) => r.seq)).toEqual(range(1, total + 1))
      expect(table.map((r) => r.message.n).sort((x, y) => x - y)).toEqual(range(0, total))
      for (const follower of [followA, followB]) {
        const got = Chunk.toReadonlyArray(yield* Fiber.join(follower))
        expect(got).toEqual(table)
      }
    }))

  it.scoped(`${name}: retention by size deletes the oldest rows; seq and reads carry on`, () =>
    Effect.gen(function*() {
      const url = yield* (yield* Backing).fresh
      const store = yield* SqlStore.make(yield* StoreUrl.parse(url))
      const log = yield* SqlEventLog.open({ name: "r", schema: Message, retention: { maxBytes: 500 } }).pipe(
        Effect.provideService(SqlStore.SqlStore, store)
      )
      yield* log.appendAll(range(0, 100).map(msg))
      yield* log.prune
      const first = yield* log.firstSeq
      expect(first).toBeGreaterThan(50)
      const kept = seqs(yield* Stream.runCollect(log.read(1)))
      expect(kept).toEqual(range(first, 101))
      expect(kept.length * JSON.stringify(msg(10)).length).toBeLessThanOrEqual(500)
      expect((yield* log.append(msg(100))).seq).toBe(101)
    }))

  it.scoped(`${name}: a Last-Event-ID beyond the end of the log, or from a wiped log, is answered with a resync, not clamped`, () =>
    Effect.gen(function*() {
      const backing = yield* Backing
      const first = yield* Effect.scoped(Effect.gen(function*() {
        const log = yield* openLog(yield* backing.fresh)
        yield* log.appendAll(range(0, 5).map(msg))
        return log.epoch
      }))
      // The log is replaced (a fresh database: `serve --fake-model` started again): its ids start at 1 again.
      const log = yield* openLog(yield* backing.fresh)
      yield* log.appendAll(range(0, 2).map(msg))
      expect(log.epoch).not.toBe(first)
      expect(yield* EventLog.resume(log, EventLog.cursor(first, 1))).toEqual({ _tag: "Resync", reason: "other epoch" })
      expect(yield* EventLog.resume(log, "5")).toEqual({ _tag: "Resync", reason: "beyond the end" })
      expect(yield* EventLog.resume(log, EventLog.cursor(log.epoch, 9))).toEqual({ _tag: "Resync", reason: "beyond the end" })
      expect(yield* EventLog.resume(log, "garbage!")).toEqual({ _tag: "Resync", reason: "malformed" })
      expect(yield* EventLog.resume(log, EventLog.cursor(log.epoch, 1))).toEqual({ _tag: "After", seq: 1 })
    }))
})
