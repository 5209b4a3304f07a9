import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import { EventLog } from "@skein/store"
import { Chunk, Effect, Fiber, Schema, Stream } from "effect"
import * as Path from "node:path"

const Message = Schema.Struct({ type: Schema.String, n: Schema.Number })
type Message = typeof Message.Type

const msg = (n: number): Message => ({ type: "assistant", n })

const tempDir = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "skein-events-" }))

/** The segment files, without the log's `epoch` file. */
const segmentFiles = (fs: FileSystem.FileSystem, dir: string) =>
  Effect.map(fs.readDirectory(dir), (names) => names.filter((name) => name.endsWith(".jsonl")))

const seqs = (records: Chunk.Chunk<EventLog.Record<Message>>) => Chunk.toReadonlyArray(records).map((r) => r.seq)

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i)

describe("EventLog", () => {
  it.scopedLive("seq keeps growing across reopen, and a torn tail is cut", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = Path.join(yield* tempDir, "session")
      yield* Effect.scoped(Effect.gen(function*() {
        const log = yield* EventLog.open({ dir, schema: Message })
        expect(yield* log.nextSeq).toBe(1)
        const first = yield* log.append(msg(0))
        expect(first.seq).toBe(1)
        expect((yield* log.appendAll([msg(1), msg(2), msg(3)])).map((r) => r.seq)).toEqual([2, 3, 4])
      }))
      // A crash mid-write left half a record.
      const [segment] = yield* segmentFiles(fs, dir)
      const path = Path.join(dir, segment!)
      yield* fs.writeFile(path, new TextEncoder().encode(`${yield* fs.readFileString(path)}{"seq":5,"at":1,"mess`))
      yield* Effect.scoped(Effect.gen(function*() {
        const log = yield* EventLog.open({ dir, schema: Message })
        expect(yield* log.nextSeq).toBe(5)
        expect((yield* log.append(msg(4))).seq).toBe(5)
        const all = yield* Stream.runCollect(log.read())
        expect(seqs(all)).toEqual([1, 2, 3, 4, 5])
        expect(Chunk.toReadonlyArray(all).map((r) => r.message.n)).toEqual([0, 1, 2, 3, 4])
      }))
      expect(((yield* fs.stat(dir)).mode & 0o777)).toBe(0o700)
      expect(((yield* fs.stat(path)).mode & 0o777)).toBe(0o600)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("reads from a seq across rotated segments", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* tempDir
      const log = yield* EventLog.open({ dir, schema: Message, segmentBytes: 300 })
      for (let i = 0; i < 40; i++) yield* log.append(msg(i))
      const files = yield* segmentFiles(fs, dir)
      expect(files.length).toBeGreaterThan(5)
      expect(seqs(yield* Stream.runCollect(log.read(17)))).toEqual(range(17, 41))
      expect(seqs(yield* Stream.runCollect(log.read(3, 9)))).toEqual(range(3, 9))
      expect(seqs(yield* Stream.runCollect(log.read(41)))).toEqual([])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("follows live with no gap or duplicate while appends race", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      // A tiny follower buffer and no tail in memory force the slow follower to catch up from disk.
      const log = yield* EventLog.open({ dir, schema: Message, segmentBytes: 2048, followBuffer: 4, tailBytes: 0 })
      for (let i = 0; i < 50; i++) yield* log.append(msg(i))
      const total = 600
      const writer = yield* Effect.fork(
        Effect.forEach(range(50, total), (i) => Effect.zipRight(log.append(msg(i)), Effect.yieldNow()), { discard: true })
      )
      const fast = yield* Effect.fork(Stream.runCollect(Stream.take(log.follow(1), total)))
      const slow = yield* Effect.fork(Stream.runCollect(
        log.follow(20).pipe(Stream.tap(() => Effect.sleep("1 millis")), Stream.take(total - 19))
      ))
      yield* Fiber.join(writer)
      expect(seqs(yield* Fiber.join(fast))).toEqual(range(1, total + 1))
      const slowSeqs = seqs(yield* Fiber.join(slow))
      expect(slowSeqs).toEqual(range(20, total + 1))
      // Records carry their messages, in order.
      const tail = yield* Stream.runCollect(log.read(total - 2))
      expect(Chunk.toReadonlyArray(tail).map((r) => r.message.n)).toEqual([total - 3, total - 2, total - 1])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a follower that fell behind catches up from the tail in memory; one further behind reads the disk up to it", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const fs = yield* FileSystem.FileSystem
      let diskReads = 0
      // Node's FileSystem, counting the segment reads.
      const counting = FileSystem.FileSystem.of({
        ...fs,
        stream: (path, options) => {
          diskReads++
          return fs.stream(path, options)
        }
      })
      const openLog = (tailBytes: number) =>
        Effect.provideService(
          EventLog.open({ dir: Path.join(dir, String(tailBytes)), schema: Message, segmentBytes: 2048, followBuffer: 4, tailBytes }),
          FileSystem.FileSystem,
          counting
        )
      const race = (log: EventLog.EventLog<Message>) =>
        Effect.gen(function*() {
          for (let i = 0; i < 50; i++) yield* log.append(msg(i))
          const writer = yield* Effect.fork(
            Effect.forEach(range(50, 400), (i) => Effect.zipRight(log.append(msg(i)), Effect.yieldNow()), { discard: true })
          )
          const slow = yield* Effect.fork(Stream.runCollect(
            log.follow(1).pipe(Stream.tap(() => Effect.sleep("1 millis")), Stream.take(400))
          ))
          yield* Fiber.join(writer)
          const records = Chunk.toReadonlyArray(yield* Fiber.join(slow))
          expect(records.map((r) => r.seq)).toEqual(range(1, 401))
          expect(records.map((r) => r.message.n)).toEqual(range(0, 400))
        })
      // Everything fits in the tail: no segment is read at all.
      yield* race(yield* openLog(1024 * 1024))
      expect(diskReads).toBe(0)
      // A tail of a few records: the disk serves what it no longer holds, with no gap or duplicate at the seam.
      yield* race(yield* openLog(200))
      expect(diskReads).toBeGreaterThan(0)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a batch appended at once reaches a follower in whole chunks, not a record per step", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const log = yield* EventLog.open({ dir, schema: Message })
      yield* log.appendAll(range(0, 50).map(msg))
      const sizes: Array<number> = []
      const follower = yield* Effect.fork(
        log.follow(1).pipe(
          Stream.mapChunks((chunk) => {
            sizes.push(chunk.length)
            return chunk
          }),
          Stream.take(150),
          Stream.runCollect
        )
      )
      yield* Effect.sleep("50 millis")
      yield* log.appendAll(range(50, 150).map(msg))
      expect(seqs(yield* Fiber.join(follower))).toEqual(range(1, 151))
      // 150 records: from disk, then the live batch, each in far fewer steps than records.
      expect(sizes.length).toBeLessThan(10)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("retention by size deletes the oldest closed segments; seq and reads carry on", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* tempDir
      const log = yield* EventLog.open({ dir, schema: Message, segmentBytes: 300, retention: { maxBytes: 1000 } })
      for (let i = 0; i < 100; i++) yield* log.append(msg(i))
      const sizes = yield* Effect.forEach(yield* segmentFiles(fs, dir), (name) => fs.stat(Path.join(dir, name)))
      const total = sizes.reduce((sum, info) => sum + Number(info.size), 0)
      // Retention runs at each rotation: the active segment may add up to one segment more.
      expect(total).toBeLessThanOrEqual(1000 + 300)
      expect(sizes.length).toBeLessThan(10)
      const first = yield* log.firstSeq
      expect(first).toBeGreaterThan(1)
      expect(seqs(yield* Stream.runCollect(log.read(1)))).toEqual(range(first, 101))
      expect((yield* log.append(msg(100))).seq).toBe(101)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("retention by age deletes closed segments older than maxAge, never the active one", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* tempDir
      const log = yield* EventLog.open({ dir, schema: Message, segmentBytes: 300, retention: { maxAge: "1 day" } })
      for (let i = 0; i < 30; i++) yield* log.append(msg(i))
      const before = (yield* segmentFiles(fs, dir)).sort()
      expect(before.length).toBeGreaterThan(2)
      // Age every segment by two days: only the closed ones may go.
      const twoDaysAgo = new Date(Date.now() - 2 * 24 * 3600 * 1000)
      for (const name of before) yield* fs.utimes(Path.join(dir, name), twoDaysAgo, twoDaysAgo)
      const deleted = yield* log.prune
      expect(deleted.map((path) => Path.basename(path)).sort()).toEqual(before.slice(0, -1))
      expect(yield* segmentFiles(fs, dir)).toEqual(before.slice(-1))
      expect((yield* log.append(msg(30))).seq).toBe(31)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a Last-Event-ID beyond the end of the log, or from a wiped log, is answered with a resync, not clamped", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = Path.join(yield* tempDir, "events")
      const old = yield* Effect.scoped(Effect.gen(function*() {
        const log = yield* EventLog.open({ dir, schema: Message })
        yield* log.appendAll(range(0, 5).map(msg))
        expect(yield* EventLog.resume(log, EventLog.cursor(log.epoch, 3))).toEqual({ _tag: "After", seq: 3 })
        return log.epoch
      }))
      // Reopened, the log keeps its epoch: old cursors still resume.
      yield* Effect.scoped(Effect.gen(function*() {
        const log = yield* EventLog.open({ dir, schema: Message })
        expect(log.epoch).toBe(old)
      }))
      // Wiped (as `serve --fake-model` started on a fresh state dir): ids start at 1 again under a new epoch.
      yield* fs.remove(dir, { recursive: true })
      const log = yield* EventLog.open({ dir, schema: Message })
      yield* log.appendAll(range(0, 2).map(msg))
      expect(log.epoch).not.toBe(old)
      expect(yield* EventLog.resume(log, EventLog.cursor(old, 1))).toEqual({ _tag: "Resync", reason: "other epoch" })
      expect(yield* EventLog.resume(log, "4")).toEqual({ _tag: "Resync", reason: "beyond the end" })
      expect(yield* EventLog.resume(log, "1")).toEqual({ _tag: "After", seq: 1 })
      expect(yield* EventLog.resume(log, "id-with spaces")).toEqual({ _tag: "Resync", reason: "malformed" })
    }).pipe(Effect.provide(NodeContext.layer)))
})
