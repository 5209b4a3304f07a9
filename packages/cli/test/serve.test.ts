import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Path from "node:path"
import { throwawayParent } from "../src/Serve.js"
import { errorLine, folder, processesIn, skein } from "./skein.js"

/** A stand-in OTLP/HTTP collector: records the paths and bodies POSTed to it. */
const collector = Effect.acquireRelease(
  Effect.async<{ readonly url: string; readonly posts: Array<{ readonly path: string; readonly body: string }>; readonly server: Http.Server }>((resume) => {
    const posts: Array<{ readonly path: string; readonly body: string }> = []
    const server = Http.createServer((request, response) => {
      let body = ""
      request.setEncoding("utf8").on("data", (chunk: string) => (body += chunk)).on("end", () => {
        posts.push({ path: request.url ?? "", body })
        response.writeHead(200, { "content-type": "application/json" }).end("{}")
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      if (address !== null && typeof address === "object") resume(Effect.succeed({ url: `http://127.0.0.1:${address.port}`, posts, server }))
    })
  }),
  ({ server }) =>
    Effect.async<void>((resume) => {
      server.close(() => resume(Effect.void))
    })
)

describe("skein serve", () => {
  it.scopedLive("prints its URL and token, answers with the token only, traces to --otel, and stops on SIGTERM", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const otel = yield* collector
      let checked: Promise<ReadonlyArray<number>> | undefined
      const ran = yield* skein(["serve", "--fake-model", "--port", "0", "--otel", otel.url], {
        cwd,
        env: { SKEIN_SERVER_TOKEN: undefined },
        onStdout: (child, stdout) => {
          const url = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/m.exec(stdout)?.[1]
          const token = /^token: (\S+) \(stored in .+\)$/m.exec(stdout)?.[1]
          if (checked !== undefined || url === undefined || token === undefined) return
          const auth = `Basic ${Buffer.from(`opencode:${token}`).toString("base64")}`
          checked = Promise.all([
            fetch(`${url}/session`).then((r) => r.status),
            fetch(`${url}/session`, { headers: { authorization: auth } }).then((r) => r.status)
          ]).finally(() => child.kill("SIGTERM"))
        }
      })
      expect(checked).toBeDefined()
      expect(yield* Effect.promise(() => checked!)).toEqual([401, 200])
      expect(ran.stderr).toBe("")
      expect(ran.code).toBe(143)
      // The spans of the two requests went out when the tracer shut down.
      expect(otel.posts.map((p) => p.path)).toContain("/v1/traces")
      expect(otel.posts.map((p) => p.body).join("")).toContain("/session")
      expect(processesIn(cwd)).toEqual([])
    }), 180_000)

  it.scopedLive("a port in use is one line and a non-zero exit", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const busy = yield* collector
      const port = new URL(busy.url).port
      const ran = yield* skein(["serve", "--fake-model", "--port", port], { cwd })
      expect(errorLine(ran)).toMatch(new RegExp(`could not listen on 127\\.0\\.0\\.1:${port}`))
      expect(processesIn(cwd)).toEqual([])
    }), 120_000)

  it.scopedLive("beyond loopback without a token is one line and a non-zero exit", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const ran = yield* skein(["--hostname", "0.0.0.0", "serve", "--port", "0"], { cwd, env: { SKEIN_SERVER_TOKEN: undefined } })
      expect(errorLine(ran)).toMatch(/listening on 0\.0\.0\.0 needs a token: set SKEIN_SERVER_TOKEN/)
    }), 120_000)

  it.scopedLive("a token from SKEIN_SERVER_TOKEN is not printed; --fake-model's folder left by a SIGKILL is removed by the next start", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const secret = "given-by-the-person-0123456789"
      let killedRoot: string | undefined
      const first = yield* skein(["serve", "--fake-model", "--port", "0"], {
        cwd,
        env: { SKEIN_SERVER_TOKEN: secret },
        onStdout: (child, stdout) => {
          if (killedRoot !== undefined || !/^token: /m.test(stdout)) return
          killedRoot = Fs.readdirSync(throwawayParent()).find((name) => name.startsWith(`${child.pid}-`))
          child.kill("SIGKILL")
        }
      })
      expect(first.signal).toBe("SIGKILL")
      expect(first.stdout).toContain("token: from SKEIN_SERVER_TOKEN")
      expect(first.stdout).not.toContain(secret)
      expect(killedRoot).toBeDefined()
      // Left behind: nothing ran its finalizer.
      expect(Fs.existsSync(Path.join(throwawayParent(), killedRoot!))).toBe(true)
      let swept: boolean | undefined
      yield* skein(["serve", "--fake-model", "--port", "0"], {
        cwd,
        env: { SKEIN_SERVER_TOKEN: secret },
        onStdout: (child, stdout) => {
          if (swept !== undefined || !/^token: /m.test(stdout)) return
          swept = !Fs.existsSync(Path.join(throwawayParent(), killedRoot!))
          child.kill("SIGTERM")
        }
      })
      expect(swept).toBe(true)
    }), 180_000)

  it.scopedLive("examples/serve.ts --fake-model is skein serve --fake-model: the same lines, the same model ([slow] streams)", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const example = Path.resolve(import.meta.dirname, "../../../examples/serve.ts")
      const tsx = Path.resolve(import.meta.dirname, "../../../node_modules/tsx/dist/cli.mjs")
      const ran = yield* Effect.async<{ readonly stdout: string; readonly reply: string }>((resume) => {
        const child = ChildProcess.spawn(process.execPath, [tsx, "--conditions=@skein/source", example, "--fake-model", "--port", "0"], {
          cwd,
          env: { ...process.env, SKEIN_SERVER_TOKEN: "example-token" },
          stdio: ["ignore", "pipe", "pipe"]
        })
        let stdout = ""
        let reply = ""
        let asked = false
        child.stdout.setEncoding("utf8").on("data", (text: string) => {
          stdout += text
          const url = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/m.exec(stdout)?.[1]
          if (asked || url === undefined || !/^token: /m.test(stdout)) return
          asked = true
          const headers = { authorization: "Bearer example-token", "content-type": "application/json" }
          void (async () => {
            const session = await (await fetch(`${url}/session`, { method: "POST", headers, body: "{}" })).json() as { id: string }
            const answer = await (await fetch(`${url}/session/${session.id}/message`, {
              method: "POST",
              headers,
              body: JSON.stringify({ parts: [{ type: "text", text: "[slow] tell me" }] })
            })).json() as { parts: ReadonlyArray<{ type: string; text?: string }> }
            reply = answer.parts.flatMap((p) => (p.type === "text" && p.text !== undefined ? [p.text] : [])).join("")
          })().finally(() => child.kill("SIGTERM"))
        })
        child.once("close", () => resume(Effect.succeed({ stdout, reply })))
        return Effect.sync(() => child.kill("SIGKILL"))
      })
      expect(ran.stdout).toMatch(/^listening on http:\/\/127\.0\.0\.1:\d+\ntoken: from SKEIN_SERVER_TOKEN\n/)
      // The command's model: `[slow]` gets its long streamed answer, not the greeting.
      expect(ran.reply).toContain("Part 40:")
    }), 180_000)
})
