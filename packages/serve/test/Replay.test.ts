import { describe, expect, it } from "@effect/vitest"
import { Canonical } from "@skein/protocol"
import { ClaudeCli } from "@skein/testkit"
import { Effect, Exit, Fiber, Scope } from "effect"
import * as Harness from "./harness.js"

interface Frame {
  readonly id: number
  readonly type: string
  readonly properties: Record<string, unknown>
}

const decodeFrame = (raw: string): Frame | undefined => {
  let id: number | undefined
  let data = ""
  for (const line of raw.split("\n")) {
    if (line.startsWith("id: ")) id = Number(line.slice(4).split("-").pop())
    else if (line.startsWith("data: ")) data += line.slice(6)
  }
  if (id === undefined || data === "") return undefined
  const json: { type: string; properties: Record<string, unknown> } = JSON.parse(data)
  return { id, type: json.type, properties: json.properties }
}

/** Where the client connects now (`undefined` while the server restarts), and how to cut its connection. */
interface Target {
  url: string | undefined
  headers: Record<string, string>
  abort: AbortController | undefined
}

const cut = (target: Target) => target.abort?.abort()

/**
 * One connection: reads frames until `stop` says so or the target cuts it,
 * then drops the socket (whatever is in flight is lost, as in a real
 * disconnect). Returns the frames read whole.
 */
const connect = async (target: Target, url: string, lastId: number | undefined, stop: (f: Frame) => boolean) => {
  const abort = new AbortController()
  target.abort = abort
  const frames: Array<Frame> = []
  try {
    const response = await fetch(url, {
      headers: { ...target.headers, ...(lastId === undefined ? {} : { "last-event-id": String(lastId) }) },
      signal: abort.signal
    })
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    let buffer = ""
    for (;;) {
      const { done, value } = await reader.read()
      if (done) return frames
      buffer += decoder.decode(value, { stream: true })
      let end: number
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const frame = decodeFrame(buffer.slice(0, end))
        buffer = buffer.slice(end + 2)
        if (frame === undefined) continue
        frames.push(frame)
        if (stop(frame)) {
          abort.abort()
          return frames
        }
      }
    }
  } catch {
    return frames
  }
}

const event = (n: number, padding = "") => Canonical.event("session.info", { sessionID: "ses_replay", message: `event ${n}${padding}` })

const publishAll = (server: Harness.Running, from: number, count: number, padding = "") =>
  Effect.forEach(
    Array.from({ length: count / 50 }, (_, batch) => batch),
    (batch) =>
      Effect.zipRight(
        server.events.publish(server.dirs.cwd, Array.from({ length: 50 }, (_, i) => event(from + batch * 50 + i, padding))),
        Effect.sleep("1 millis")
      ),
    { discard: true }
  )

const eventUrl = (server: Harness.Running) => `${server.url}/event?directory=${encodeURIComponent(server.dirs.cwd)}`

const targetOf = (server: Harness.Running): Target => ({ url: eventUrl(server), headers: server.headers, abort: undefined })

/**
 * Reconnects with the last id it read as Last-Event-ID after every
 * `perConnection` events (and whenever its connection is cut), until `last`
 * arrived. `progress` holds the ids read so far.
 */
const readAll = (target: Target, start: number | undefined, last: number, perConnection: number, progress: Array<number> = []) =>
  Effect.promise(async () => {
    let cursor = start
    let connections = 0
    while (progress.at(-1) !== last) {
      const url = target.url
      if (url === undefined) {
        await new Promise((resolve) => setTimeout(resolve, 10))
        continue
      }
      connections++
      let n = 0
      const frames = await connect(target, url, cursor, (f) => f.type === "session.info" && (++n >= perConnection || f.id === last))
      for (const f of frames) {
        cursor = f.id
        if (f.type === "session.info") progress.push(f.id)
      }
    }
    return { ids: progress, connections, cursor }
  })

const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i)

describe("SSE replay", () => {
  it.scopedLive("100 forced disconnects in a 10,000-event stream: 0 lost, 0 duplicated; the same across a server restart", () =>
    Effect.gen(function*() {
      const dirs = yield* ClaudeCli.offlineDirs("skein-replay-")
      const first = yield* Scope.make()
      const server = yield* Harness.start(undefined, { dirs }).pipe(Scope.extend(first))
      const before = yield* server.events.nextSeq
      const publisher = yield* Effect.fork(publishAll(server, 0, 10_000))
      const phase1 = yield* readAll(targetOf(server), before - 1, before - 1 + 10_000, 100)
      yield* Fiber.join(publisher)
      expect(phase1.connections).toBe(100)
      expect(phase1.ids).toEqual(range(before, 10_000))

      // A second 10,000-event stream, 100 disconnects again, and the server restarts in the middle:
      // half the events are written by the first server, the client has read only half of those.
      const start2 = before + 10_000
      const target = targetOf(server)
      const progress: Array<number> = []
      const reader = yield* Effect.fork(readAll(target, phase1.cursor, start2 - 1 + 10_000, 100, progress))
      yield* publishAll(server, 10_000, 5_000)
      yield* Effect.repeat(Effect.sleep("10 millis"), { until: () => progress.length >= 2_500 })
      target.url = undefined
      cut(target)
      yield* Scope.close(first, Exit.void)

      // A new server over the same state: the seq goes on, the client resumes where it stopped.
      const restarted = yield* Harness.start(undefined, { dirs })
      expect(yield* restarted.events.nextSeq).toBe(start2 + 5_000)
      target.url = eventUrl(restarted)
      yield* publishAll(restarted, 15_000, 5_000)
      const phase2 = yield* Fiber.join(reader)
      expect(phase2.connections).toBeGreaterThanOrEqual(100)
      expect(phase2.ids).toEqual(range(start2, 10_000))
    }), { timeout: 360_000 })

  it.scopedLive("the first frame is server.connected; ?lastEventId= works like the header; canonical-only drops the legacy types", () =>
    Effect.gen(function*() {
      const server = yield* Harness.start(undefined)
      yield* server.events.publish(server.dirs.cwd, [
        event(1),
        Canonical.event("session.result", { sessionID: "ses_replay", message: {} }),
        event(2)
      ])
      const base = `${server.url}/event?directory=${encodeURIComponent(server.dirs.cwd)}`
      const all = yield* Effect.promise(() => connect(targetOf(server), `${base}&lastEventId=0`, undefined, (f) => f.type === "session.info" && f.properties["message"] === "event 2"))
      expect(all.map((f) => f.type)).toEqual(["server.connected", "session.info", "session.result", "session.info"])
      expect(all.map((f) => f.id)).toEqual([0, 1, 2, 3])
      const v2 = yield* Effect.promise(() =>
        connect({ ...targetOf(server), headers: { ...server.headers, "accept-event-version": "2" } }, `${base}&lastEventId=0`, undefined, (f) => f.properties["message"] === "event 2")
      )
      expect(v2.map((f) => f.type)).toEqual(["server.connected", "session.info", "session.info"])
      const global = yield* Effect.promise(async () => {
        const response = await fetch(`${server.url}/global/event`, { headers: { ...server.headers, "last-event-id": "0" } })
        const reader = response.body!.getReader()
        let text = ""
        while (!text.includes("event 2")) text += new TextDecoder().decode((await reader.read()).value)
        await reader.cancel()
        return text
      })
      expect(global).toContain(`"directory":${JSON.stringify(server.dirs.cwd)}`)
      expect(global).toContain(`"payload":{"id":"evt_`)
    }))
})
