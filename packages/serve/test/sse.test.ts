/**
 * The feed from the log to one SSE client, in-process: `ServerEvents` over a
 * temporary folder, `Sse.stream` read as text, no HTTP and no CLI.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Canonical } from "@skein/protocol"
import { Effect, FastCheck, Fiber, Stream } from "effect"
import * as PermissionBroker from "../src/PermissionBroker.js"
import * as ServerEvents from "../src/ServerEvents.js"
import * as Sse from "../src/internal/sse.js"

const directory = "/work/lag"

interface Frame {
  readonly id: number | undefined
  readonly type: string
  readonly properties: { readonly [key: string]: unknown }
}

const framesOf = (text: string): ReadonlyArray<Frame> =>
  text.split("\n\n").filter((raw) => raw.includes("data: ")).map((raw) => {
    let id: number | undefined
    let data = ""
    for (const line of raw.split("\n")) {
      if (line.startsWith("id: ")) id = Number(line.slice(4).split("-").pop())
      if (line.startsWith("data: ")) data = line.slice(6)
    }
    const json: { type: string; properties: Frame["properties"] } = JSON.parse(data)
    return { id, type: json.type, properties: json.properties }
  })

const deltaText = (frames: ReadonlyArray<Frame>) =>
  frames.filter((f) => f.type === "message.part.delta").map((f) => String(f.properties["delta"])).join("")

/** `pairs` canonical deltas, each followed by its legacy dual-write record. */
const dualWrite = (pairs: number) =>
  Array.from({ length: pairs }, (_, i) => [
    Canonical.event("message.part.delta", { sessionID: "ses_lag", messageID: "msg_lag", partID: "prt_lag", field: "text", delta: `${i};` }),
    Canonical.event("session.result", { sessionID: "ses_lag", message: {} })
  ]).flat()

const expectedText = (pairs: number) => Array.from({ length: pairs }, (_, i) => `${i};`).join("")

/**
 * Connects a live client, then publishes `pairs` dual-write pairs in one batch
 * and reads until it has every delta's text or the stream ends (a resync
 * closes it). One pending frame at most: the feed stops at the first event that
 * does not merge, so the client is behind the whole batch when it resumes.
 */
const lagged = (canonicalOnly: boolean, pairs: number, maxLag: number, maxEvents = 1) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = yield* fs.makeTempDirectoryScoped({ prefix: "skein-sse-" })
    const events = yield* ServerEvents.make({ dir })
    const broker = yield* PermissionBroker.make()
    const stream = yield* Sse.stream({
      events,
      broker,
      directory,
      lastEventId: undefined,
      canonicalOnly,
      heartbeat: "1 hour",
      maxLag,
      buffer: { maxEvents }
    })
    const want = expectedText(pairs)
    let text = ""
    let published = false
    yield* stream.pipe(
      Stream.decodeText(),
      Stream.tap((chunk) =>
        Effect.suspend(() => {
          text += chunk
          if (published) return Effect.void
          published = true
          return Effect.asVoid(events.publish(directory, dualWrite(pairs)))
        })
      ),
      Stream.takeUntil(() => deltaText(framesOf(text)) === want),
      Stream.runDrain
    )
    return framesOf(text)
  })


/** Raw `id:` lines and event types of a client that connects to `events` holding `lastEventId`, until `until` frames with data. */
const connectWith = (events: ServerEvents.ServerEvents["Type"], lastEventId: string | undefined, until: number) =>
  Effect.gen(function*() {
    const broker = yield* PermissionBroker.make()
    const stream = yield* Sse.stream({
      events,
      broker,
      directory,
      lastEventId,
      canonicalOnly: true,
      heartbeat: "1 hour",
      maxLag: 1_000
    })
    let text = ""
    const frames = () =>
      text.split("\n\n").filter((raw) => raw.includes("data: ")).map((raw) => {
        const data: { type: string; properties: Record<string, unknown> } = JSON.parse(/^data: (.*)$/m.exec(raw)![1]!)
        return { id: /^id: (.*)$/m.exec(raw)?.[1], data }
      })
    yield* stream.pipe(
      Stream.decodeText(),
      Stream.tap((chunk) => Effect.sync(() => void (text += chunk))),
      Stream.takeUntil(() => frames().length >= until),
      Stream.runDrain
    )
    return frames()
  })

/** A live client of `dir` (`undefined`: `/global/event`), read as text until `done` says so. */
const readUntil = (
  events: ServerEvents.ServerEvents["Type"],
  dir: string | undefined,
  done: (frames: ReadonlyArray<Frame>) => boolean,
  client: { readonly canonicalOnly?: boolean; readonly maxEvents?: number } = {}
) =>
  Effect.gen(function*() {
    const broker = yield* PermissionBroker.make()
    const stream = yield* Sse.stream({
      events,
      broker,
      directory: dir,
      lastEventId: undefined,
      canonicalOnly: client.canonicalOnly ?? true,
      heartbeat: "1 hour",
      maxLag: 100_000,
      buffer: { maxEvents: client.maxEvents }
    })
    let text = ""
    const frames = () =>
      text.split("\n\n").filter((raw) => raw.includes("data: ")).map((raw): Frame => {
        const json: { type: string; properties: Frame["properties"]; payload?: { type: string; properties: Frame["properties"] } } = JSON.parse(/^data: (.*)$/m.exec(raw)![1]!)
        const id = /^id: (.*)$/m.exec(raw)?.[1]
        const payload = json.payload ?? json
        return { id: id === undefined ? undefined : Number(id.split("-").pop()), type: payload.type, properties: payload.properties }
      })
    let connected!: () => void
    const ready = new Promise<void>((resolve) => (connected = resolve))
    const reading = yield* stream.pipe(
      Stream.decodeText(),
      Stream.tap((chunk) => Effect.sync(() => {
        text += chunk
        connected()
      })),
      Stream.takeUntil(() => done(frames())),
      Stream.runDrain,
      Effect.map(frames),
      Effect.fork
    )
    yield* Effect.promise(() => ready)
    return reading
  })

const delta = (i: number) => Canonical.event("message.part.delta", { sessionID: "ses_run", messageID: "msg_run", partID: "prt_run", field: "text", delta: `${i};` })

/** The legacy raw copy of a text delta, as the translator dual-writes it. */
const rawDelta = (i: number) =>
  Canonical.event("session.stream_event", {
    sessionID: "ses_run",
    message: { type: "stream_event", parent_tool_use_id: null, event: { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: `${i};` } } }
  })

const rawText = (frames: ReadonlyArray<Frame>) =>
  frames.filter((f) => f.type === "session.stream_event").map((f) => {
    const message = f.properties["message"] as { event: { delta: { text: string } } }
    return message.event.delta.text
  }).join("")

const infos = (n: number) => Array.from({ length: n }, (_, i) => Canonical.event("session.info", { sessionID: "ses_lag", message: `event ${i}` }))

describe("Sse.itemOf", () => {
  it("renders a merged delta's frame (the shared JSON around its text) as the whole event rendered with that text", () => {
    const record = (seq: number) => ({
      seq,
      at: 0,
      message: { directory, payload: delta(seq) }
    }) satisfies ServerEvents.Record
    FastCheck.assert(
      FastCheck.property(FastCheck.string({ unit: "binary", maxLength: 40 }), FastCheck.boolean(), FastCheck.integer({ min: 1, max: 1e9 }), (text, global, seq) => {
        const item = Sse.itemOf(global, record(seq), "e")
        if (item._tag !== "Delta") throw new Error("a delta is mergeable")
        const whole = JSON.parse(item.data)
        const payload = global ? whole.payload : whole
        const want = { ...payload, properties: { ...payload.properties, delta: text } }
        const merged = JSON.parse(item.render(seq, text))
        expect(merged).toEqual(global ? { directory, payload: want } : want)
        // Twice: the second render uses the template the first made.
        expect(item.render(seq, text)).toBe(item.render(seq, text))
      }),
      { numRuns: 100 }
    )
  })
})

describe("Sse.stream", () => {
  it.scoped("a batch of deltas reaches every client of the shared feed as joined runs: the same text, exact ids, and another directory's client skips them", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const events = yield* ServerEvents.make({ dir: yield* fs.makeTempDirectoryScoped({ prefix: "skein-sse-runs-" }) })
      const idle = (frames: ReadonlyArray<Frame>) => frames.some((f) => f.type === "session.idle")
      const [own, global, other] = [
        yield* readUntil(events, directory, idle),
        yield* readUntil(events, undefined, (frames) => frames.filter((f) => f.type === "session.idle").length === 2),
        yield* readUntil(events, "/work/other", idle)
      ]
      // One batch: 500 deltas of one part, then the turn's end; then the other directory's own event.
      const batch = [...Array.from({ length: 500 }, (_, i) => delta(i)), Canonical.event("session.idle", { sessionID: "ses_run" })]
      const records = yield* events.publish(directory, batch)
      const theirs = yield* events.publish("/work/other", [Canonical.event("session.idle", { sessionID: "ses_other" })])
      const want = Array.from({ length: 500 }, (_, i) => `${i};`).join("")
      for (const frames of [yield* Fiber.join(own), yield* Fiber.join(global)]) {
        const deltas = frames.filter((f) => f.type === "message.part.delta")
        expect(deltaText(frames)).toBe(want)
        // Joined: fewer frames than events, and each id holds every event up to it.
        expect(deltas.length).toBeLessThan(100)
        expect(deltas.at(-1)!.id).toBe(records[499]!.seq)
        expect(frames.find((f) => f.type === "session.idle")!.id).toBe(records[500]!.seq)
      }
      const others = yield* Fiber.join(other)
      expect(others.filter((f) => f.type === "message.part.delta")).toEqual([])
      expect(others.find((f) => f.type === "session.idle")!.id).toBe(theirs[0]!.seq)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a delta and its legacy copy, interleaved in the log, are joined per kind: each client gets every text once, ids in order up to the last event", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const events = yield* ServerEvents.make({ dir: yield* fs.makeTempDirectoryScoped({ prefix: "skein-sse-pairs-" }) })
      const idle = (frames: ReadonlyArray<Frame>) => frames.some((f) => f.type === "session.idle")
      const legacy = yield* readUntil(events, directory, idle, { canonicalOnly: false })
      const canonical = yield* readUntil(events, directory, idle, { canonicalOnly: true })
      // Too small for a chunk's joined items: it takes the chunk record by record.
      const small = yield* readUntil(events, directory, idle, { canonicalOnly: false, maxEvents: 3 })
      const batch = [...Array.from({ length: 300 }, (_, i) => [delta(i), rawDelta(i)]).flat(), Canonical.event("session.idle", { sessionID: "ses_run" })]
      const records = yield* events.publish(directory, batch)
      const want = Array.from({ length: 300 }, (_, i) => `${i};`).join("")
      const last = records.at(-1)!.seq
      for (const [frames, raw] of [[yield* Fiber.join(legacy), want], [yield* Fiber.join(canonical), ""], [yield* Fiber.join(small), want]] as const) {
        expect(deltaText(frames)).toBe(want)
        expect(rawText(frames)).toBe(raw)
        const ids = frames.flatMap((f) => f.id === undefined ? [] : [f.id])
        expect(ids).toEqual([...ids].sort((a, b) => a - b))
        expect(frames.find((f) => f.type === "session.idle")!.id).toBe(last)
      }
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a canonical-only client's lag counts only canonical events: 150 records behind, 75 of them its own, within maxLag 100", () =>
    Effect.gen(function*() {
      const frames = yield* lagged(true, 75, 100)
      expect(frames.some((f) => f.type === "server.resync")).toBe(false)
      expect(frames.some((f) => f.type === "session.result")).toBe(false)
      expect(deltaText(frames)).toBe(expectedText(75))
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a legacy client gets both writes, so both count: the same batch puts it past maxLag and it is resynced", () =>
    Effect.gen(function*() {
      const frames = yield* lagged(false, 75, 100)
      const resync = frames.find((f) => f.type === "server.resync")
      expect(resync?.properties["reason"]).toBe("slow client")
      expect(Number(resync?.properties["behind"])).toBeGreaterThan(100)
      expect(deltaText(frames)).not.toBe(expectedText(75))
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a client whose buffer never fills is not cut off, however far the feed trails the log", () =>
    Effect.gen(function*() {
      // 300 records arrive in one batch, far past maxLag 10; the buffer takes them all.
      const frames = yield* lagged(false, 150, 10, 2048)
      expect(frames.some((f) => f.type === "server.resync")).toBe(false)
      expect(deltaText(frames)).toBe(expectedText(150))
    }).pipe(Effect.provide(NodeContext.layer)))
  it.scoped("a Last-Event-ID beyond the end of the log, or from a wiped log, gets server.resync and this log's own ids, never clamped", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      // The first incarnation: a server whose config folder is then wiped (e.g. `--fake-model` restarted).
      const old = yield* ServerEvents.make({ dir: yield* fs.makeTempDirectoryScoped({ prefix: "skein-sse-old-" }) })
      const held = (yield* old.publish(directory, infos(5))).at(-1)!
      const oldCursor = `${old.epoch}-${held.seq}`
      const events = yield* ServerEvents.make({ dir: yield* fs.makeTempDirectoryScoped({ prefix: "skein-sse-new-" }) })
      expect(events.epoch).not.toBe(old.epoch)
      const records = yield* events.publish(directory, infos(3))
      const ids = records.map((r) => `${events.epoch}-${r.seq}`)

      // connected, resync, then the new log from its start under ids the client never held.
      const foreign = yield* connectWith(events, oldCursor, 5)
      expect(foreign.map((f) => f.data.type)).toEqual(["server.connected", "server.resync", "session.info", "session.info", "session.info"])
      expect(foreign[1]!.data.properties["reason"]).toBe("other epoch")
      expect(foreign.slice(2).map((f) => f.id)).toEqual(ids)
      expect(foreign.slice(2).some((f) => f.id === oldCursor)).toBe(false)

      // A bare seq past the end (a client of an older server) is not clamped either.
      const beyond = yield* connectWith(events, "40", 5)
      expect(beyond[1]!.data.properties["reason"]).toBe("beyond the end")
      expect(beyond.slice(2).map((f) => f.id)).toEqual(ids)

      // This log's own cursor resumes after it, with no resync.
      const own = yield* connectWith(events, ids[0]!, 3)
      expect(own.map((f) => f.data.type)).toEqual(["server.connected", "session.info", "session.info"])
      expect(own.slice(1).map((f) => f.id)).toEqual(ids.slice(1))
    }).pipe(Effect.provide(NodeContext.layer)))
})
