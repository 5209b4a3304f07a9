/**
 * The HttpApi surface without a CLI: the OpenAPI document and its UI, the
 * error bodies of the routes added with it, and the idle timer alone.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Option, Stream, SubscriptionRef, TestClock } from "effect"
import { idleFor } from "../src/internal/idle.js"
import * as Harness from "./harness.js"

const call = (url: string, init?: RequestInit) =>
  Effect.promise(async () => {
    const response = await fetch(url, init)
    const text = await response.text()
    const json = response.headers.get("content-type")?.includes("json") === true && text !== "" ? JSON.parse(text) : undefined
    return { status: response.status, type: response.headers.get("content-type"), text, json }
  })

describe("skein serve routes", () => {
  it.scopedLive("GET /doc is an OpenAPI document of the routes; /doc/ui loads nothing from elsewhere; both need the token", () =>
    Effect.gen(function*() {
      const server = yield* Harness.start(undefined)
      expect((yield* call(`${server.url}/doc`)).status).toBe(401)
      const doc = yield* call(`${server.url}/doc`, { headers: server.headers })
      expect(doc.status).toBe(200)
      expect(doc.json.openapi).toMatch(/^3\./)
      const paths = Object.keys(doc.json.paths)
      for (
        const path of [
          "/global/health",
          "/session",
          "/session/{sessionID}",
          "/session/{sessionID}/message/{messageID}",
          "/session/{sessionID}/fork",
          "/session/{sessionID}/summarize",
          "/session/{sessionID}/prompt_async",
          "/permission/{requestID}/reply",
          "/question/{requestID}/reject",
          "/project/global/directories",
          "/api/location"
        ]
      ) expect(paths).toContain(path)
      expect(Object.keys(doc.json.paths["/session/{sessionID}"])).toEqual(expect.arrayContaining(["get", "patch", "delete"]))
      const ui = yield* call(`${server.url}/doc/ui`, { headers: server.headers })
      expect(ui.status).toBe(200)
      expect(ui.type).toContain("text/html")
      expect(ui.text).toContain("SwaggerUIBundle")
      // Every script and stylesheet is inline.
      expect(ui.text).not.toMatch(/<script[^>]+src=/)
      expect(ui.text).not.toMatch(/<link[^>]+href=/)
    }))

  it.scopedLive("errors are {name, data: {message}}: a bad PATCH body is 400, unknown ids are 404, questions list empty", () =>
    Effect.gen(function*() {
      const server = yield* Harness.start(undefined)
      const headers = { ...server.headers, "content-type": "application/json" }
      const created = yield* call(`${server.url}/session`, { method: "POST", headers, body: "{}" })
      const id = created.json.id
      const bad = yield* call(`${server.url}/session/${id}`, { method: "PATCH", headers, body: JSON.stringify({ title: 5 }) })
      expect(bad.status).toBe(400)
      expect(bad.json).toEqual({ name: "BadRequest", data: { message: expect.stringContaining("title") } })
      const renamed = yield* call(`${server.url}/session/${id}`, { method: "PATCH", headers, body: JSON.stringify({ title: "renamed" }) })
      expect(renamed.json.title).toBe("renamed")
      const message = yield* call(`${server.url}/session/${id}/message/msg_nope`, { headers })
      expect(message.status).toBe(404)
      expect(message.json.name).toBe("NotFoundError")
      expect((yield* call(`${server.url}/session/ses_nope/fork`, { method: "POST", headers, body: "{}" })).status).toBe(404)
      expect((yield* call(`${server.url}/question`, { headers })).json).toEqual([])
      const reject = yield* call(`${server.url}/question/que_nope/reject`, { method: "POST", headers })
      expect(reject.status).toBe(404)
      expect(reject.json.name).toBe("NotFoundError")
      expect((yield* call(`${server.url}/session/status`, { headers })).json).toEqual({})
      // CORS headers reach the written response (the guard is a router middleware).
      const cors = yield* Effect.promise(() => fetch(`${server.url}/session/${id}`, { headers: { ...headers, origin: server.url } }))
      expect(cors.headers.get("access-control-allow-origin")).toBe(server.url)
      const dirs = yield* call(`${server.url}/project/global/directories`, { headers })
      expect(dirs.json).toEqual([{ directory: server.dirs.cwd }])
      const location = yield* call(`${server.url}/api/model?location[directory]=${encodeURIComponent(server.dirs.cwd)}`, { headers })
      expect(location.json).toEqual({ location: { directory: server.dirs.cwd, project: { id: "global", directory: server.dirs.cwd } }, data: [] })
      expect((yield* call(`${server.url}/api/model?location[directory]=/etc`, { headers })).status).toBe(403)
      // A fork of a session with no transcript yet is an empty session with its parent.
      const fork = yield* call(`${server.url}/session/${id}/fork`, { method: "POST", headers, body: "{}" })
      expect(fork.json.parentID).toBe(id)
      const children = yield* call(`${server.url}/session/${id}/children`, { headers })
      expect(children.json.map((s: { id: string }) => s.id)).toEqual([fork.json.id])
      expect((yield* call(`${server.url}/session/${fork.json.id}`, { method: "DELETE", headers })).json).toBe(true)
      expect((yield* call(`${server.url}/session/${fork.json.id}`, { headers })).status).toBe(404)
    }))

  it.effect("the idle timer fires after the timeout of silence once every prompt's turn ended, not while busy or queued", () =>
    Effect.gen(function*() {
      const busy = yield* SubscriptionRef.make(false)
      const ended = yield* SubscriptionRef.make(0)
      const prompts = yield* SubscriptionRef.make(1)
      const timer = yield* Effect.fork(idleFor({ busy, ended: ended.changes, prompts }, "10 seconds"))
      // A prompt sent, its turn not started: not idle however long it takes.
      yield* TestClock.adjust("1 minute")
      expect(Option.isNone(yield* Fiber.poll(timer))).toBe(true)
      yield* SubscriptionRef.set(busy, true)
      yield* TestClock.adjust("1 minute")
      expect(Option.isNone(yield* Fiber.poll(timer))).toBe(true)
      yield* SubscriptionRef.set(busy, false)
      yield* SubscriptionRef.set(ended, 1)
      yield* TestClock.adjust("9 seconds")
      expect(Option.isNone(yield* Fiber.poll(timer))).toBe(true)
      yield* TestClock.adjust("2 seconds")
      expect(yield* Fiber.join(timer)).toBe(1)
      // Silence restarts with every change.
      const again = yield* Effect.fork(idleFor({ busy, ended: Stream.make(1), prompts }, "10 seconds"))
      yield* TestClock.adjust("5 seconds")
      yield* SubscriptionRef.set(prompts, 2)
      yield* SubscriptionRef.set(busy, true)
      yield* SubscriptionRef.set(busy, false)
      yield* TestClock.adjust("1 minute")
      expect(Option.isNone(yield* Fiber.poll(again))).toBe(true)
    }))
})
