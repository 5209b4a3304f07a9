import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Canonical } from "@skein/protocol"
import { Effect, Exit, Redacted } from "effect"
import * as Net from "node:net"
import { Ids } from "@skein/canonical"
import { Session } from "@skein/session"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Token from "../src/Token.js"
import * as Harness from "./harness.js"

const call = (url: string, init?: RequestInit) =>
  Effect.promise(async () => {
    const response = await fetch(url, init)
    const text = await response.text()
    return { status: response.status, body: text === "" ? undefined : JSON.parse(text) }
  })

describe("skein serve security", () => {
  it.scopedLive("a missing or wrong token is 401; bearer and basic auth with the token pass", () =>
    Effect.gen(function*() {
      const server = yield* Harness.start(undefined)
      const none = yield* call(`${server.url}/global/health`)
      expect(none.status).toBe(401)
      expect(none.body.name).toBe("Unauthorized")
      expect(typeof none.body.data.message).toBe("string")
      expect((yield* call(`${server.url}/session`, { headers: { authorization: "Bearer wrong" } })).status).toBe(401)
      const basicWrong = Buffer.from("opencode:wrong").toString("base64")
      expect((yield* call(`${server.url}/session`, { headers: { authorization: `Basic ${basicWrong}` } })).status).toBe(401)
      expect((yield* call(`${server.url}/global/health`, { headers: server.headers })).status).toBe(200)
      const basic = Buffer.from(`anyone:${Harness.token}`).toString("base64")
      const ok = yield* call(`${server.url}/global/health`, { headers: { authorization: `Basic ${basic}` } })
      expect(ok).toEqual({ status: 200, body: { healthy: true, version: "skein" } })
    }))

  it.scopedLive("a foreign Origin is 403, even with the token", () =>
    Effect.gen(function*() {
      const server = yield* Harness.start(undefined)
      const foreign = yield* call(`${server.url}/session`, { headers: { ...server.headers, origin: "https://evil.example" } })
      expect(foreign.status).toBe(403)
      expect(foreign.body.name).toBe("ForbiddenOrigin")
    }))

  it.scopedLive("directory outside the roots, with .., or through a symlink out is 403; inside is served", () =>
    Effect.gen(function*() {
      const server = yield* Harness.start(undefined)
      const cwd = server.dirs.cwd
      Fs.mkdirSync(Path.join(cwd, "sub"))
      Fs.symlinkSync(server.dirs.configDir, Path.join(cwd, "escape"))
      const at = (directory: string) => call(`${server.url}/session?directory=${encodeURIComponent(directory)}`, { headers: server.headers })
      expect((yield* at("/etc")).status).toBe(403)
      expect((yield* at(`${cwd}/../${Path.basename(cwd)}`)).status).toBe(403)
      expect((yield* at(Path.join(cwd, "escape"))).status).toBe(403)
      expect((yield* at("relative/path")).status).toBe(403)
      expect((yield* at(Path.join(cwd, "sub"))).status).toBe(200)
      const header = yield* call(`${server.url}/session`, { headers: { ...server.headers, "x-opencode-directory": encodeURIComponent("/etc") } })
      expect(header.status).toBe(403)
      expect(header.body.name).toBe("DirectoryRejected")
      // POST goes through the same check.
      const post = yield* call(`${server.url}/session?directory=/etc`, { method: "POST", headers: server.headers, body: "{}" })
      expect(post.status).toBe(403)
    }))

  it.scopedLive("a body the schema rejects is 400 with the schema's message; an unknown session is 404", () =>
    Effect.gen(function*() {
      const server = yield* Harness.start(undefined)
      const headers = { ...server.headers, "content-type": "application/json" }
      const created = yield* call(`${server.url}/session`, { method: "POST", headers, body: JSON.stringify({ title: "t" }) })
      expect(created.status).toBe(200)
      const bad = yield* call(`${server.url}/session/${created.body.id}/message`, { method: "POST", headers, body: JSON.stringify({ parts: 5 }) })
      expect(bad.status).toBe(400)
      expect(bad.body.name).toBe("BadRequest")
      expect(bad.body.data.message).toContain("parts")
      const missing = yield* call(`${server.url}/session/ses_nope`, { headers })
      expect(missing.status).toBe(404)
      expect(missing.body.name).toBe("NotFoundError")
      const noRoute = yield* call(`${server.url}/no/such/route`, { headers })
      expect(noRoute.status).toBe(404)
    }))

  it.effect("a non-loopback bind without an explicit token is refused at start; loopback generates one, stored 0600", () =>
    Effect.gen(function*() {
      const saved = process.env.SKEIN_SERVER_TOKEN
      delete process.env.SKEIN_SERVER_TOKEN
      const stateDir = Fs.mkdtempSync("/tmp/skein-token-")
      const refused = yield* Effect.exit(Token.resolve({ hostname: "0.0.0.0", stateDir }))
      expect(Exit.isFailure(refused)).toBe(true)
      const generated = yield* Token.resolve({ hostname: "127.0.0.1", stateDir })
      expect(Redacted.value(generated.token).length).toBeGreaterThanOrEqual(32)
      expect(Fs.statSync(generated.file!).mode & 0o777).toBe(0o600)
      expect(Fs.readFileSync(generated.file!, "utf8").trim()).toBe(Redacted.value(generated.token))
      const given = yield* Token.resolve({ hostname: "0.0.0.0", stateDir, token: "explicit" })
      expect(Redacted.value(given.token)).toBe("explicit")
      if (saved !== undefined) process.env.SKEIN_SERVER_TOKEN = saved
      Fs.rmSync(stateDir, { recursive: true })
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("the token stays Redacted, and its file is written whole: no temporary file is left, a rewrite replaces it", () =>
    Effect.gen(function*() {
      const saved = process.env.SKEIN_SERVER_TOKEN
      process.env.SKEIN_SERVER_TOKEN = "from-the-environment"
      const stateDir = Fs.mkdtempSync("/tmp/skein-token-")
      const fromEnv = yield* Token.resolve({ hostname: "127.0.0.1", stateDir })
      expect(fromEnv.file).toBeUndefined()
      expect(Redacted.isRedacted(fromEnv.token)).toBe(true)
      expect(String(fromEnv.token)).not.toContain("from-the-environment")
      expect(JSON.stringify(fromEnv)).not.toContain("from-the-environment")
      delete process.env.SKEIN_SERVER_TOKEN
      const first = yield* Token.resolve({ hostname: "127.0.0.1", stateDir })
      const second = yield* Token.resolve({ hostname: "127.0.0.1", stateDir })
      expect(Fs.readFileSync(second.file!, "utf8").trim()).toBe(Redacted.value(second.token))
      expect(Redacted.value(first.token)).not.toBe(Redacted.value(second.token))
      expect(Fs.readdirSync(stateDir)).toEqual(["token"])
      if (saved !== undefined) process.env.SKEIN_SERVER_TOKEN = saved
      Fs.rmSync(stateDir, { recursive: true })
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("DNS rebinding: a foreign name in Host is 403 even with a matching Origin; loopback names and configured hosts pass", () =>
    Effect.gen(function*() {
      const server = yield* Harness.start(undefined)
      const port = new URL(server.url).port
      const rebinding = yield* raw(port, [
        "GET /session HTTP/1.1",
        `Host: evil.example:${port}`,
        `Origin: http://evil.example:${port}`,
        `Authorization: Bearer ${Harness.token}`,
        "Connection: close",
        "",
        ""
      ].join("\r\n"))
      expect(rebinding).toMatch(/^HTTP\/1\.1 403/)
      expect(rebinding).toContain("ForbiddenHost")
      for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`]) {
        const answer = yield* raw(port, `GET /global/health HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${Harness.token}\r\nConnection: close\r\n\r\n`)
        expect(answer).toMatch(/^HTTP\/1\.1 200/)
      }
      const configured = yield* Harness.start(undefined, { hosts: ["skein.lan"] })
      const port2 = new URL(configured.url).port
      const named = yield* raw(port2, `GET /global/health HTTP/1.1\r\nHost: skein.lan:${port2}\r\nAuthorization: Bearer ${Harness.token}\r\nConnection: close\r\n\r\n`)
      expect(named).toMatch(/^HTTP\/1\.1 200/)
    }))

  it.scopedLive("body size limits: a 300 MB login is 413 before its body is read; JSON routes take a few MB, chunked or not", () =>
    Effect.gen(function*() {
      const server = yield* Harness.start(undefined)
      const port = new URL(server.url).port
      // Only the headers and a few bytes are sent: the answer comes without the other 300 MB.
      const login = yield* raw(port, [
        "POST /dashboard/login HTTP/1.1",
        `Host: 127.0.0.1:${port}`,
        "Content-Type: application/json",
        `Content-Length: ${300 * 1024 * 1024}`,
        "",
        "{\"token\": \""
      ].join("\r\n"))
      expect(login).toMatch(/^HTTP\/1\.1 413/)
      expect(login).toContain("PayloadTooLarge")
      const headers = { ...server.headers, "content-type": "application/json" }
      const created = yield* call(`${server.url}/session`, { method: "POST", headers, body: "{}" })
      const head = (extra: string) =>
        [`PATCH /session/${created.body.id} HTTP/1.1`, `Host: 127.0.0.1:${port}`, `Authorization: Bearer ${Harness.token}`, extra, "", ""].join("\r\n")
      const declared = yield* raw(port, head(`Content-Length: ${5 * 1024 * 1024}`) + "{\"title\": \"")
      expect(declared).toMatch(/^HTTP\/1\.1 413/)
      expect(declared).toContain("PayloadTooLarge")
      // Chunked: no length declared; reading stops at the limit and the connection is dropped (the platform ends it there).
      const chunk = `{"title": "${"x".repeat(5 * 1024 * 1024)}"}`
      const chunked = yield* raw(port, head("Transfer-Encoding: chunked") + `${Buffer.byteLength(chunk).toString(16)}\r\n${chunk}\r\n0\r\n\r\n`)
      expect(chunked).not.toMatch(/^HTTP\/1\.1 200/)
      const after = yield* call(`${server.url}/session/${created.body.id}`, { headers })
      expect(after.body.title).toBe(created.body.title)
      // Under the limit, the same route reads it.
      const small = yield* call(`${server.url}/session/${created.body.id}`, { method: "PATCH", headers, body: JSON.stringify({ title: "x".repeat(1024 * 1024) }) })
      expect(small.status).toBe(200)
      // A prompt may carry files: a 5 MB one is read (and refused by its schema, not its size).
      const prompt = yield* call(`${server.url}/session/${created.body.id}/message`, {
        method: "POST",
        headers,
        body: JSON.stringify({ parts: 5, padding: "x".repeat(5 * 1024 * 1024) })
      })
      expect(prompt.status).toBe(400)
    }))

  it.scopedLive("--root confines every route: a session of another project is not listed (/session, /dashboard/sessions) nor found by id", () =>
    Effect.gen(function*() {
      const server = yield* Harness.start(undefined)
      const inside = crypto.randomUUID()
      const outside = crypto.randomUUID()
      writeTranscript(server.dirs.configDir, server.dirs.cwd, inside, "inside the root")
      writeTranscript(server.dirs.configDir, server.dirs.root, outside, "another project")
      const headers = server.headers
      const byId = (cliId: string) => call(`${server.url}/session/${Ids.session(cliId)}`, { headers })
      expect((yield* byId(inside)).status).toBe(200)
      const foreign = yield* byId(outside)
      expect(foreign.status).toBe(404)
      expect((yield* call(`${server.url}/session/${Ids.session(outside)}/message`, { headers })).status).toBe(404)
      expect((yield* call(`${server.url}/session/${Ids.session(outside)}/prompt_async`, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: JSON.stringify({ parts: [{ type: "text", text: "hi" }] })
      })).status).toBe(404)
      const listed = (yield* call(`${server.url}/session`, { headers })).body.map((s: { id: string }) => s.id)
      expect(listed).toEqual([Ids.session(inside)])
      const dashboard = (yield* call(`${server.url}/dashboard/sessions`, { headers })).body.map((s: { id: string }) => s.id)
      expect(dashboard).toEqual([Ids.session(inside)])
      // /global/event replays only the roots' events, though the log holds another root's of an earlier run.
      const before = (yield* server.events.nextSeq) - 1
      yield* server.events.publish(server.dirs.root, [Canonical.event("session.info", { sessionID: "ses_out", message: "outside" })])
      yield* server.events.publish(server.dirs.cwd, [Canonical.event("session.info", { sessionID: "ses_in", message: "inside" })])
      const directories = yield* Effect.promise(async () => {
        const controller = new AbortController()
        const response = await fetch(`${server.url}/global/event?lastEventId=${before}`, { headers, signal: controller.signal })
        const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
        let text = ""
        while (!text.includes("ses_in")) {
          const { done, value } = await reader.read()
          if (done) break
          text += value
        }
        controller.abort()
        return text.split("\n\n").flatMap((frame) => {
          const data = /^data: (.*)$/m.exec(frame)?.[1]
          if (data === undefined) return []
          const json: { directory: string; payload: { type: string } } = JSON.parse(data)
          return json.payload.type === "session.info" ? [json.directory] : []
        })
      })
      expect(directories).toEqual([server.dirs.cwd])
    }))
})

/** A transcript the CLI would have written for a session in `cwd`, found by the server under its config root. */
const writeTranscript = (configDir: string, cwd: string, cliSessionId: string, prompt: string) => {
  const path = Session.transcriptPath(configDir, cwd, cliSessionId)
  Fs.mkdirSync(Path.dirname(path), { recursive: true })
  const entry = {
    type: "user",
    uuid: crypto.randomUUID(),
    parentUuid: null,
    sessionId: cliSessionId,
    cwd,
    timestamp: new Date().toISOString(),
    isSidechain: false,
    userType: "external",
    version: "2.1.332",
    message: { role: "user", content: prompt }
  }
  Fs.writeFileSync(path, JSON.stringify(entry) + "\n")
}

/** One request on a raw socket, as a browser or a hostile client sends it; the answer's text, once its body is whole. */
const raw = (port: string, request: string) =>
  Effect.async<string>((resume) => {
    const socket = Net.connect(Number(port), "127.0.0.1")
    let answer = ""
    const done = () => {
      socket.destroy()
      resume(Effect.succeed(answer))
    }
    socket.setEncoding("utf8")
    socket.on("data", (chunk: string) => {
      answer += chunk
      const end = answer.indexOf("\r\n\r\n")
      const length = /content-length: (\d+)/i.exec(answer)
      if (end >= 0 && length !== null && Buffer.byteLength(answer.slice(end + 4)) >= Number(length[1])) done()
    })
    socket.on("end", done)
    socket.on("error", done)
    socket.write(request)
    return Effect.sync(() => socket.destroy())
  })