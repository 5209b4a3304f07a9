/**
 * EventLog's internal units, each alone against a temporary folder: segment
 * naming and listing, the record format, the active segment's rotation, and
 * retention by size and by age (under TestClock).
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Option, ParseResult, Schema, TestClock } from "effect"
import * as Path from "node:path"
import * as EventRecord from "../src/internal/eventRecord.js"
import * as EventRetention from "../src/internal/eventRetention.js"
import { EventTail } from "../src/internal/eventTail.js"
import * as Segments from "../src/internal/eventSegments.js"
import * as SegmentWriter from "../src/internal/segmentWriter.js"

const Message = Schema.Struct({ n: Schema.NumberFromString })

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i)

const tempDir = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "skein-events-units-" }))

/** Writes segment files of `bytes` bytes each, named after these first seqs. */
const writeSegments = (dir: string, firstSeqs: ReadonlyArray<number>, bytes: number) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) =>
    Effect.forEach(firstSeqs, (seq) => fs.writeFileString(Path.join(dir, Segments.segmentName(seq)), "x".repeat(bytes))))

const names = (dir: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => Effect.map(fs.readDirectory(dir), (all) => [...all].sort()))

layer(NodeContext.layer)("EventLog units", (it) => {
  it.scoped("segments are listed in seq order; other files and a missing folder list nothing", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* tempDir
      expect(Segments.segmentName(42)).toBe("0000000000000042.jsonl")
      expect(Segments.segmentSeq("0000000000000042.jsonl")).toBe(42)
      expect(Segments.segmentSeq("42.jsonl")).toBeUndefined()
      yield* writeSegments(dir, [100, 1, 20], 1)
      yield* fs.writeFileString(Path.join(dir, "notes.txt"), "")
      const listed = yield* Segments.listSegments(fs, dir)
      expect(listed.map((segment) => segment.firstSeq)).toEqual([1, 20, 100])
      expect(yield* Segments.listSegments(fs, Path.join(dir, "missing"))).toEqual([])
    }))

  it.scoped("the next seq follows the last whole record; a torn last line is cut first", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* tempDir
      const segment = { firstSeq: 7, path: Path.join(dir, Segments.segmentName(7)) }
      yield* fs.writeFileString(segment.path, "")
      expect(yield* Segments.resumeSeq(fs, segment)).toBe(7)
      const encode = EventRecord.encodeBatch(Message, dir)
      const { bytes } = yield* encode([{ n: 1 }, { n: 2 }], 7, 0)
      yield* fs.writeFile(segment.path, new Uint8Array([...bytes, ...new TextEncoder().encode(`{"seq":9,"at":0,"mes`)]))
      expect(yield* Segments.resumeSeq(fs, segment)).toBe(9)
      expect(yield* fs.readFileString(segment.path)).toBe(new TextDecoder().decode(bytes))
    }))

  it.effect("records encode with consecutive seqs and decode back; a foreign or torn line decodes to nothing", () =>
    Effect.gen(function*() {
      const { bytes, records } = yield* EventRecord.encodeBatch(Message, "/log")([{ n: 1 }, { n: 2 }], 5, 1234)
      expect(records).toEqual([{ seq: 5, at: 1234, message: { n: 1 } }, { seq: 6, at: 1234, message: { n: 2 } }])
      const lines = new TextDecoder().decode(bytes).split("\n")
      expect(lines[0]).toBe(`{"seq":5,"at":1234,"message":{"n":"1"}}`)
      const decode = EventRecord.decodeRecord(Message)
      expect(lines.slice(0, 2).map(decode)).toEqual(records.map(Option.some))
      expect(decode(`{"seq":5,"at":1,"message":{"n":1}}`)).toEqual(Option.none())
      expect(decode(`{"seq":5,"at":1,"mess`)).toEqual(Option.none())
    }))

  it.effect("a message its schema cannot encode fails the batch with a typed error naming the log", () =>
    Effect.gen(function*() {
      const Even = Schema.transformOrFail(Schema.String, Schema.Number, {
        decode: (s) => ParseResult.succeed(Number(s)),
        encode: (n, _, ast) => n % 2 === 0 ? ParseResult.succeed(String(n)) : ParseResult.fail(new ParseResult.Type(ast, n, "odd"))
      })
      const encode = EventRecord.encodeBatch(Even, "/log")
      expect((yield* encode([2, 4], 1, 0)).records.map((r) => r.seq)).toEqual([1, 2])
      const error = yield* Effect.flip(encode([2, 3], 1, 0))
      expect(error._tag).toBe("EventLogError")
      expect(error.path).toBe("/log")
      expect(error.message).toMatch(/cannot encode a message: .*odd/s)
    }))

  it.effect("a schema without transformations: messages are written as they are and read back through its guard", () =>
    Effect.gen(function*() {
      const Plain = Schema.Struct({ type: Schema.String, properties: Schema.Unknown })
      const message = { type: "message.part.delta", properties: { delta: "hé", n: [1, { x: null }] } }
      const { bytes, records } = yield* EventRecord.encodeBatch(Plain, "/log")([message], 1, 7)
      expect(records).toEqual([{ seq: 1, at: 7, message }])
      const line = new TextDecoder().decode(bytes).trimEnd()
      expect(line).toBe(JSON.stringify({ seq: 1, at: 7, message }))
      const decode = EventRecord.decodeRecord(Plain)
      expect(decode(line)).toEqual(Option.some({ seq: 1, at: 7, message }))
      // What the schema does not accept is skipped, as a transforming schema's failure is.
      expect(decode(`{"seq":2,"at":7,"message":{"type":3,"properties":{}}}`)).toEqual(Option.none())
      expect(decode(`{"seq":"2","at":7,"message":{"type":"a","properties":{}}}`)).toEqual(Option.none())
      expect(decode(`{"seq":2,"at":7}`)).toEqual(Option.none())
      expect(decode(`[1,2]`)).toEqual(Option.none())
    }))

  it("the tail keeps the newest records within its budget, slices by seq, and forgets what retention deleted", () => {
    const tail = new EventTail<number>(100)
    const records = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => ({ seq: from + i, at: 0, message: from + i }))
    expect(tail.first()).toBeUndefined()
    expect(tail.slice(1, 5)).toEqual([])
    tail.add(records(1, 5), 40)
    tail.add(records(5, 9), 40)
    expect(tail.first()).toBe(1)
    expect(tail.slice(3, 6).map((r) => r.seq)).toEqual([3, 4, 5])
    // 120 bytes held: the oldest go until the rest fit in 100.
    tail.add(records(9, 13), 40)
    expect(tail.first()).toBe(3)
    expect(tail.slice(1, 100).map((r) => r.seq)).toEqual(range(3, 13))
    tail.dropBefore(11)
    expect(tail.slice(1, 100).map((r) => r.seq)).toEqual([11, 12])
    // One record larger than the budget is still held: the newest always is.
    tail.add(records(13, 14), 1000)
    expect(tail.slice(1, 100).map((r) => r.seq)).toEqual([13])
  })

  it.scoped("the writer rotates when a write would overflow a segment that holds something", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* tempDir
      const writer = yield* SegmentWriter.make(fs, { dir, scope: yield* Effect.scope, segmentBytes: 10, fsync: false, last: undefined })
      const bytes = (n: number) => new Uint8Array(n).fill(0x61)
      expect(writer.active()).toBeUndefined()
      expect(yield* writer.write(1, bytes(6))).toBe(true)
      expect(yield* writer.write(2, bytes(6))).toBe(true)
      expect(yield* writer.write(3, bytes(4))).toBe(false)
      expect(yield* writer.write(4, bytes(20))).toBe(true)
      expect(writer.active()).toEqual({ path: Path.join(dir, Segments.segmentName(4)), size: 20 })
      expect(yield* names(dir)).toEqual([1, 2, 4].map(Segments.segmentName))
      const sizes = yield* Effect.forEach([1, 2, 4], (seq) => fs.stat(Path.join(dir, Segments.segmentName(seq))))
      expect(sizes.map((info) => Number(info.size))).toEqual([6, 10, 20])
    }))

  it.scoped("the writer keeps appending to the newest segment it reopens", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* tempDir
      yield* writeSegments(dir, [1], 4)
      const last = { firstSeq: 1, path: Path.join(dir, Segments.segmentName(1)) }
      const writer = yield* SegmentWriter.make(fs, { dir, scope: yield* Effect.scope, segmentBytes: 10, fsync: true, last })
      expect(writer.active()).toEqual({ path: last.path, size: 4 })
      expect(yield* writer.write(2, new Uint8Array(3))).toBe(false)
      expect(writer.active()?.size).toBe(7)
    }))

  it.scoped("retention by size deletes the oldest closed segments, counting the active one, never deleting it", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* tempDir
      yield* writeSegments(dir, [1, 11, 21, 31], 100)
      const active = { path: Path.join(dir, Segments.segmentName(31)), size: 100 }
      expect(yield* EventRetention.prune(fs, dir, undefined, active)).toEqual([])
      const deleted = yield* EventRetention.prune(fs, dir, { maxBytes: 250 }, active)
      expect(deleted).toEqual([1, 11].map((seq) => Path.join(dir, Segments.segmentName(seq))))
      expect(yield* EventRetention.prune(fs, dir, { maxBytes: 0 }, active)).toEqual([Path.join(dir, Segments.segmentName(21))])
      expect(yield* names(dir)).toEqual([Segments.segmentName(31)])
    }))

  it.scoped("retention by age deletes closed segments last written longer ago than maxAge", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* tempDir
      yield* writeSegments(dir, [1, 11], 10)
      const active = { path: Path.join(dir, Segments.segmentName(11)), size: 10 }
      const mtime = Option.getOrThrow((yield* fs.stat(Path.join(dir, Segments.segmentName(1)))).mtime).getTime()
      yield* TestClock.setTime(mtime + Duration.toMillis(Duration.minutes(30)))
      expect(yield* EventRetention.prune(fs, dir, { maxAge: Duration.hours(1) }, active)).toEqual([])
      yield* TestClock.setTime(mtime + Duration.toMillis(Duration.hours(2)))
      expect(yield* EventRetention.prune(fs, dir, { maxAge: Duration.hours(1) }, active)).toEqual([
        Path.join(dir, Segments.segmentName(1))
      ])
    }))
})
