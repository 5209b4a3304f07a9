import { describe, expect, it } from "@effect/vitest"
import { Canonical } from "@skein/protocol"
import { Effect } from "effect"
import * as Harness from "./harness.js"

const call = (url: string, init?: RequestInit) =>
  Effect.promise(async () => {
    const response = await fetch(url, { redirect: "manual", ...init })
    return { status: response.status, headers: response.headers, text: await response.text() }
  })

describe("the dashboard's assets and login", () => {
  it.scopedLive("assets are public and self-contained; the data is not", () =>
    Effect.gen(function*() {
      const server = yield* Harness.start(undefined)
      const page = yield* call(`${server.url}/`)
      expect(page.status).toBe(200)
      expect(page.headers.get("content-type")).toContain("text/html")
      expect(page.headers.get("content-security-policy")).toContain("default-src 'self'")
      // Nothing is loaded from another origin.
      expect(page.text).not.toMatch(/(src|href)="(https?:)?\/\//)
      for (const asset of ["/dashboard/app.js", "/dashboard/store.js", "/dashboard/view.js", "/dashboard/style.css"]) {
        const served = yield* call(`${server.url}${asset}`)
        expect(served.status).toBe(200)
        expect(served.text).not.toMatch(/https?:\/\//)
      }
      expect((yield* call(`${server.url}/dashboard/sessions`)).status).toBe(401)
      expect(JSON.parse((yield* call(`${server.url}/dashboard/auth`)).text)).toEqual({ authenticated: false })
    }))

  it.scopedLive("?token= sets an HttpOnly SameSite=Strict cookie that the guard accepts; a wrong token sets none", () =>
    Effect.gen(function*() {
      const server = yield* Harness.start(undefined)
      const wrong = yield* call(`${server.url}/?token=wrong`)
      expect(wrong.status).toBe(401)
      expect(wrong.headers.get("set-cookie")).toBeNull()
      const right = yield* call(`${server.url}/?token=${Harness.token}`)
      expect(right.status).toBe(303)
      expect(right.headers.get("location")).toBe("/")
      const cookie = right.headers.get("set-cookie") ?? ""
      expect(cookie).toContain("HttpOnly")
      expect(cookie).toContain("SameSite=Strict")
      const jar = cookie.split(";")[0]!
      const listed = yield* call(`${server.url}/dashboard/sessions`, { headers: { cookie: jar } })
      expect(listed.status).toBe(200)
      expect((yield* call(`${server.url}/session`, { headers: { cookie: "skein_token=wrong" } })).status).toBe(401)
      // The page's own origin may call with the cookie; any other may not.
      const own = yield* call(`${server.url}/session`, { method: "POST", body: "{}", headers: { cookie: jar, origin: server.url } })
      expect(own.status).toBe(200)
      const foreign = yield* call(`${server.url}/session`, { method: "POST", body: "{}", headers: { cookie: jar, origin: "http://evil.example" } })
      expect(foreign.status).toBe(403)
    }))

  it.scopedLive("the login route takes the token as JSON; a wrong one is 401", () =>
    Effect.gen(function*() {
      const server = yield* Harness.start(undefined)
      const post = (token: string) =>
        call(`${server.url}/dashboard/login`, { method: "POST", headers: { "content-type": "application/json", origin: server.url }, body: JSON.stringify({ token }) })
      const wrong = yield* post("nope")
      expect(wrong.status).toBe(401)
      expect(wrong.headers.get("set-cookie")).toBeNull()
      const right = yield* post(Harness.token)
      expect(right.status).toBe(204)
      const jar = (right.headers.get("set-cookie") ?? "").split(";")[0]!
      expect(JSON.parse((yield* call(`${server.url}/dashboard/auth`, { headers: { cookie: jar } })).text)).toEqual({ authenticated: true })
    }))
})

/** The first `count` SSE frames of `path` as `[id, type]`. */
const frames = (server: Harness.Running, path: string, count: number, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const controller = new AbortController()
    const response = await fetch(`${server.url}${path}`, { headers: { ...server.headers, ...headers }, signal: controller.signal })
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
    const out: Array<readonly [string, string]> = []
    let buffer = ""
    while (out.length < count) {
      const { done, value } = await reader.read()
      if (done) break
      buffer += value
      const parts = buffer.split("\n\n")
      buffer = parts.pop() ?? ""
      for (const frame of parts) {
        const id = /^id: (.*)$/m.exec(frame)?.[1] ?? ""
        const data = JSON.parse(/^data: (.*)$/m.exec(frame)?.[1] ?? "{}")
        out.push([id, data.payload.type])
      }
    }
    controller.abort()
    return out.slice(0, count)
  })

describe("the event stream the dashboard reads", () => {
  it.scopedLive("?eventVersion=2 drops the legacy types; Last-Event-ID and ?lastEventId= resume alike", () =>
    Effect.gen(function*() {
      const server = yield* Harness.start(undefined)
      const before = (yield* server.events.nextSeq) - 1
      // Ids are `<epoch>-<seq>`; a bare seq (an older server's id) resumes in this log too.
      const id = (seq: number) => `${server.events.epoch}-${seq}`
      // Frames that are not events carry the cursor the client holds: here, the end of the log.
      expect(yield* frames(server, "/global/event?eventVersion=2", 1)).toEqual([[id(before), "server.connected"]])
      yield* server.events.publish(server.dirs.cwd, [
        Canonical.event("session.message", { sessionID: "ses_x", message: {} }),
        Canonical.event("session.idle", { sessionID: "ses_x" })
      ])
      const [legacy, idle] = [id(before + 1), id(before + 2)]
      const all = yield* frames(server, `/global/event?lastEventId=${before}`, 3)
      expect(all).toEqual([[id(before), "server.connected"], [legacy, "session.message"], [idle, "session.idle"]])
      const canonical = yield* frames(server, `/global/event?eventVersion=2&lastEventId=${before}`, 2)
      expect(canonical).toEqual([[id(before), "server.connected"], [idle, "session.idle"]])
      // The header (what EventSource sends when it reconnects) wins over the query the page opened with.
      const resumed = yield* frames(server, `/global/event?eventVersion=2&lastEventId=${before}`, 2, { "last-event-id": legacy })
      expect(resumed).toEqual([[legacy, "server.connected"], [idle, "session.idle"]])
    }))
})
