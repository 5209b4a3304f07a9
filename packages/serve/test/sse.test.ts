/**
 * The feed from the log to one SSE client, in-process: `ServerEvents` over a
 * temporary folder, `Sse.stream` read as text, no HTTP and no CLI.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Canonical } from "@skein/protocol"
import { Effect, Stream } from "effect"
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
      if (line.startsWith("id: ")) id = Number(line.slice(4))
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

describe("Sse.stream", () => {
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
})
