import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
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
      expect(generated.token.length).toBeGreaterThanOrEqual(32)
      expect(Fs.statSync(generated.file!).mode & 0o777).toBe(0o600)
      expect(Fs.readFileSync(generated.file!, "utf8").trim()).toBe(generated.token)
      const given = yield* Token.resolve({ hostname: "0.0.0.0", stateDir, token: "explicit" })
      expect(given.token).toBe("explicit")
      if (saved !== undefined) process.env.SKEIN_SERVER_TOKEN = saved
      Fs.rmSync(stateDir, { recursive: true })
    }).pipe(Effect.provide(NodeContext.layer)))
})
