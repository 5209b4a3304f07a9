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
    if (line.startsWith("id: ")) id = Number(line.slice(4))
    else if (line.startsWith("data: ")) data += line.slice(6)
  }
  if (id === undefined || data === "") return undefined
  const json: { type: string; properties: Record<string, unknown> } = JSON.parse(data)
  return { id, type: json.type, properties: json.properties }
}

/**
 * One connection: reads frames until `stop` says so, then drops the socket
 * (whatever is in flight is lost, as in a real disconnect). Returns the frames handled.
 */
const connect = async (url: string, headers: Record<string, string>, lastId: number | undefined, stop: (f: Frame) => boolean) => {
  const abort = new AbortController()
  const response = await fetch(url, {
    headers: { ...headers, ...(lastId === undefined ? {} : { "last-event-id": String(lastId) }) },
    signal: abort.signal
  })
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  const frames: Array<Frame> = []
  let buffer = ""
  try {
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

/** Reconnects with Last-Event-ID after every `perConnection` events until `last` arrived. */
const readAll = (url: string, headers: Record<string, string>, start: number | undefined, last: number, perConnection: number) =>
  Effect.promise(async () => {
    const ids: Array<number> = []
    let cursor = start
    let connections = 0
    while (ids.at(-1) !== last) {
      connections++
      let n = 0
      const frames = await connect(url, headers, cursor, (f) => f.type === "session.info" && (++n >= perConnection || f.id === last))
      for (const f of frames) {
        cursor = f.id
        if (f.type === "session.info") ids.push(f.id)
      }
    }
    return { ids, connections, cursor }
  })

describe("SSE replay", () => {
  it.scopedLive("100 forced disconnects in a 10,000-event stream, then a server restart: 0 lost, 0 duplicated", () =>
    Effect.gen(function*() {
      const dirs = yield* ClaudeCli.offlineDirs("skein-replay-")
      const first = yield* Scope.make()
      const server = yield* Harness.start(undefined, { dirs }).pipe(Scope.extend(first))
      const url = `${server.url}/event?directory=${encodeURIComponent(dirs.cwd)}`
      const before = yield* server.events.nextSeq
      const publisher = yield* Effect.fork(publishAll(server, 0, 10_000))
      const phase1 = yield* readAll(url, server.headers, before - 1, before - 1 + 10_000, 100)
      yield* Fiber.join(publisher)
      expect(phase1.connections).toBe(100)
      expect(phase1.ids).toEqual(Array.from({ length: 10_000 }, (_, i) => before + i))
      yield* Scope.close(first, Exit.void)

      // A new server over the same state: the seq goes on, the client resumes where it stopped.
      const restarted = yield* Harness.start(undefined, { dirs })
      expect(yield* restarted.events.nextSeq).toBe(before + 10_000)
      const url2 = `${restarted.url}/event?directory=${encodeURIComponent(dirs.cwd)}`
      const publisher2 = yield* Effect.fork(publishAll(restarted, 10_000, 1_000))
      const phase2 = yield* readAll(url2, restarted.headers, phase1.cursor, before - 1 + 11_000, 100)
      yield* Fiber.join(publisher2)
      expect(phase2.ids).toEqual(Array.from({ length: 1_000 }, (_, i) => before + 10_000 + i))
    }), { timeout: 120_000 })

  it.scopedLive("the first frame is server.connected; ?lastEventId= works like the header; canonical-only drops the legacy types", () =>
    Effect.gen(function*() {
      const server = yield* Harness.start(undefined)
      yield* server.events.publish(server.dirs.cwd, [
        event(1),
        Canonical.event("session.result", { sessionID: "ses_replay", message: {} }),
        event(2)
      ])
      const base = `${server.url}/event?directory=${encodeURIComponent(server.dirs.cwd)}`
      const all = yield* Effect.promise(() => connect(`${base}&lastEventId=0`, server.headers, undefined, (f) => f.type === "session.info" && f.properties["message"] === "event 2"))
      expect(all.map((f) => f.type)).toEqual(["server.connected", "session.info", "session.result", "session.info"])
      expect(all.map((f) => f.id)).toEqual([0, 1, 2, 3])
      const v2 = yield* Effect.promise(() =>
        connect(`${base}&lastEventId=0`, { ...server.headers, "accept-event-version": "2" }, undefined, (f) => f.properties["message"] === "event 2")
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
