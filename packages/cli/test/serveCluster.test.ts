/**
 * `skein serve --cluster`: the server as a cluster runner. On sqlite it is
 * one runner whose sessions are entities: a prompt over HTTP is answered by
 * the fake model, and the session is listed from the cluster's catalog.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Path from "node:path"
import { errorLine, folder, processesIn, skein } from "./skein.js"

const token = "cluster-cli-token-0123456789"

describe("skein serve --cluster", () => {
  it.scopedLive("sqlite: a prompt over HTTP reaches the session's entity and is answered; SIGTERM stops it", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      let checked: Promise<{ readonly answer: string; readonly listed: ReadonlyArray<string>; readonly id: string }> | undefined
      const ran = yield* skein(["serve", "--fake-model", "--port", "0", "--cluster", `sqlite:${Path.join(cwd, "cluster.db")}`], {
        cwd,
        env: { SKEIN_SERVER_TOKEN: token },
        onStdout: (child, stdout) => {
          const url = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/m.exec(stdout)?.[1]
          if (checked !== undefined || url === undefined) return
          const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" }
          checked = (async () => {
            const session = (await (await fetch(`${url}/session`, { method: "POST", headers, body: "{}" })).json()) as { id: string }
            const reply = await fetch(`${url}/session/${session.id}/message`, {
              method: "POST",
              headers,
              body: JSON.stringify({ parts: [{ type: "text", text: "hello" }] })
            })
            const answer = await reply.text()
            const sessions = (await (await fetch(`${url}/session`, { headers })).json()) as ReadonlyArray<{ id: string }>
            const listed = sessions.map((s) => s.id)
            return { answer, listed, id: session.id }
          })().finally(() => child.kill("SIGTERM"))
        }
      })
      expect(checked).toBeDefined()
      const result = yield* Effect.promise(() => checked!)
      expect(result.answer).toContain("\"role\":\"assistant\"")
      expect(result.listed).toContain(result.id)
      expect(ran.code).toBe(143)
      expect(processesIn(cwd)).toEqual([])
    }), 180_000)

  it.scopedLive("--runner-address needs a Postgres cluster", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const ran = yield* skein(["serve", "--fake-model", "--port", "0", "--cluster", "sqlite:x.db", "--runner-address", "127.0.0.1:1"], {
        cwd,
        env: { SKEIN_SERVER_TOKEN: token }
      })
      expect(errorLine(ran)).toMatch(/--runner-address needs --cluster postgres/)
    }), 120_000)

  it.scopedLive("--turn-drain needs --cluster, and is 0 or more seconds", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const env = { SKEIN_SERVER_TOKEN: token }
      const alone = yield* skein(["serve", "--fake-model", "--port", "0", "--turn-drain", "5"], { cwd, env })
      expect(errorLine(alone)).toMatch(/--turn-drain needs --cluster/)
      const negative = yield* skein(["serve", "--fake-model", "--port", "0", "--cluster", "sqlite:x.db", "--turn-drain=-3"], { cwd, env })
      expect(errorLine(negative)).toMatch(/--turn-drain must be 0 or more seconds, not -3/)
    }), 120_000)
})
