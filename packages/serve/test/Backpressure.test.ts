/**
 * A client that reads nothing must cost the server a bounded amount of
 * memory, and must not slow the others. The 100,000 deltas go through the
 * server's own publish path (`ServerEvents.publish`, as a session's pump
 * publishes them): the real CLI streaming that many deltas takes minutes on
 * a shared machine, and what is measured here is the SSE edge.
 */
import { describe, expect, it } from "@effect/vitest"
import { Canonical } from "@skein/protocol"
import { Effect, Fiber } from "effect"
import * as Crypto from "node:crypto"
import * as Net from "node:net"
import * as V8 from "node:v8"
import * as Vm from "node:vm"
import * as Harness from "./harness.js"

const deltas = 100_000
const batch = 200
/** 1,000 characters each: 100 MB in all, so a buffer that grew with the stream could not hide under the bound. */
const deltaText = (i: number) => String(i).padStart(8, "0") + "x".repeat(992)
/** Retained heap (after a full GC) may grow by this much at most while the stream runs. */
const heapBound = 32 * 1024 * 1024

V8.setFlagsFromString("--expose-gc")
const gc: () => void = Vm.runInNewContext("gc")
const retainedHeap = () => {
  gc()
  return process.memoryUsage().heapUsed
}

/** Sends the request and never reads: the socket's buffers fill, then the server's. */
const silentClient = (url: URL, path: string, token: string) =>
  Effect.async<{ readonly socket: Net.Socket; readonly closed: Promise<void> }>((resume) => {
    const socket = Net.connect(Number(url.port), url.hostname, () => {
      socket.write(`GET ${path} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${token}\r\nAccept: text/event-stream\r\n\r\n`)
      socket.pause()
      resume(Effect.succeed({ socket, closed }))
    })
    const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()))
    socket.on("error", () => {})
  })

interface Reading {
  lastId: number
  frames: number
  readonly hash: Crypto.Hash
}

/** Reads every frame, hashing the delta text as it comes (the 100 MB is not kept). */
const readingClient = (url: string, headers: Record<string, string>, last: number, reading: Reading) =>
  Effect.promise(async () => {
    const response = await fetch(url, { headers: { ...headers, "last-event-id": String(last) } })
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    let buffer = ""
    while (reading.lastId < last + deltas) {
      const { done, value } = await reader.read()
      if (done) break
      buffer += decoder.decode(value, { stream: true })
      let end: number
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const raw = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        const id = /^id: (?:[0-9a-z]+-)?(\d+)$/m.exec(raw)
        const data = /^data: (.*)$/m.exec(raw)
        if (data === null) continue
        const event: { type: string; properties: { delta?: string } } = JSON.parse(data[1]!)
        if (event.type !== "message.part.delta") continue
        reading.frames++
        reading.hash.update(event.properties.delta ?? "")
        if (id !== null) reading.lastId = Number(id[1])
      }
    }
    await reader.cancel()
  })

describe("SSE backpressure", () => {
  it.scopedLive("a client that reads nothing while 100,000 deltas stream: bounded heap, dropped; another client gets everything", () =>
    Effect.gen(function*() {
      const server = yield* Harness.start(undefined, { heartbeat: "1 second" })
      const dir = server.dirs.cwd
      const path = `/event?directory=${encodeURIComponent(dir)}`
      const start = (yield* server.events.nextSeq) - 1
      const silent = yield* silentClient(new URL(server.url), path, Harness.token)
      const reading: Reading = { lastId: start, frames: 0, hash: Crypto.createHash("sha256") }
      const reader = yield* Effect.fork(readingClient(`${server.url}${path}`, server.headers, start, reading))

      const baseline = retainedHeap()
      let peak = 0
      const expected = Crypto.createHash("sha256")
      for (let from = 0; from < deltas; from += batch) {
        const events = Array.from({ length: batch }, (_, i) => {
          const text = deltaText(from + i)
          expected.update(text)
          return Canonical.event("message.part.delta", { sessionID: "ses_flood", messageID: "msg_flood", partID: "prt_flood", field: "text", delta: text })
        })
        yield* server.events.publish(dir, events)
        // A producer paced by the reading client (as a CLI is by its model), never by the silent one.
        yield* Effect.repeat(Effect.sleep("1 millis"), { until: () => reading.lastId >= start + from + batch })
        if (from % 10_000 === 0) peak = Math.max(peak, retainedHeap() - baseline)
      }
      yield* Fiber.join(reader)
      peak = Math.max(peak, retainedHeap() - baseline)
      // A paused socket sees nothing; reading it now drains what the kernel holds, then the server's reset.
      silent.socket.resume()
      const dropped = yield* Effect.promise(() =>
        Promise.race([silent.closed.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 20_000))])
      )

      console.log(
        `backpressure: retained heap growth peak ${(peak / 1024 / 1024).toFixed(1)} MiB (bound ${heapBound / 1024 / 1024} MiB); ` +
          `reading client: ${reading.frames} frames for ${deltas} deltas; silent client dropped by the server: ${dropped}`
      )
      expect(reading.lastId).toBe(start + deltas)
      expect(reading.hash.digest("hex")).toBe(expected.digest("hex"))
      expect(peak).toBeLessThan(heapBound)
      // The server dropped the silent client (it never closed its own socket).
      expect(dropped).toBe(true)
    }), { timeout: 300_000 })
})
