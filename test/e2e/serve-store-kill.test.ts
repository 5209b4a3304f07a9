/**
 * `skein serve --store postgres://…` (the real command, the real CLI,
 * FakeModel) killed with SIGKILL mid-turn and started again on a different
 * config dir, as a replacement machine with the same checkout: the session
 * is listed, its messages are the same, an SSE client that reconnects with
 * its last `Last-Event-ID` gets the rest with no duplicate and no gap, and a
 * prompt resumes the session from the store.
 */
import { describe, expect, it } from "@effect/vitest"
import { ClaudeCli, FakeModel, Postgres } from "@skein/testkit"
import { Effect, Redacted } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"

const bin = Path.resolve(import.meta.dirname, "../../packages/cli/bin/skein.js")
const token = "kill-test-token-0123456789"
const headers = { authorization: `Bearer ${token}` }

interface Frame {
  readonly id: string
  readonly type: string
  readonly properties: Record<string, unknown>
}

/** `skein serve` on a free port, under `configDir`; its URL once it listens. Killed with SIGKILL by `kill` or the scope. */
const serve = (options: { readonly cwd: string; readonly configDir: string; readonly tmpDir: string; readonly store: string; readonly model: string }) =>
  Effect.gen(function*() {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        ChildProcess.spawn(process.execPath, [bin, "serve", "--port", "0", "--root", options.cwd, "--store", options.store], {
          cwd: options.cwd,
          env: {
            ...process.env,
            ...ClaudeCli.isolatedEnv({ baseUrl: options.model, configDir: options.configDir, tmpDir: options.tmpDir }),
            SKEIN_SERVER_TOKEN: token,
            NO_COLOR: "1"
          },
          stdio: ["ignore", "pipe", "pipe"]
        })
      ),
      (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
    )
    let stderr = ""
    child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text))
    const url = yield* Effect.async<string, Error>((resume) => {
      let stdout = ""
      child.stdout.setEncoding("utf8").on("data", (text: string) => {
        stdout += text
        const found = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/m.exec(stdout)?.[1]
        if (found !== undefined) resume(Effect.succeed(found))
      })
      child.once("exit", (code) => resume(Effect.fail(new Error(`skein serve exited (${code}): ${stderr}`))))
    }).pipe(Effect.timeout("90 seconds"))
    return { url, child, kill: Effect.sync(() => child.kill("SIGKILL")) }
  })

/** Reads SSE frames from `/event` (after `lastEventId`), handing each to `onFrame`; ends when the server goes or `stop` says so. */
const subscribe = (url: string, cwd: string, lastEventId: string | undefined, onFrame: (frame: Frame) => boolean) =>
  Effect.promise(async () => {
    const controller = new AbortController()
    try {
      const response = await fetch(`${url}/event?directory=${encodeURIComponent(cwd)}`, {
        headers: { ...headers, ...(lastEventId === undefined ? {} : { "last-event-id": lastEventId }) },
        signal: controller.signal
      })
      const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
      let buffer = ""
      for (;;) {
        const { done, value } = await reader.read()
        if (done) return
        buffer += value
        let end: number
        while ((end = buffer.indexOf("\n\n")) !== -1) {
          const raw = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          const id = /^id: (.*)$/m.exec(raw)?.[1]
          const data = /^data: (.*)$/m.exec(raw)?.[1]
          if (id === undefined || data === undefined) continue
          const event = JSON.parse(data) as { type: string; properties: Record<string, unknown> }
          // The server's own frames (connected, heartbeat) carry the cursor, not a record of the log.
          if (event.type.startsWith("server.")) continue
          if (onFrame({ id, type: event.type, properties: event.properties })) {
            controller.abort()
            return
          }
        }
      }
    } catch {
      // The server was killed under the stream, or the reader aborted it.
    }
  })

const api = (url: string, cwd: string) => (method: string, path: string, body?: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: { ...headers, "content-type": "application/json", "x-opencode-directory": cwd },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    const text = await response.text()
    return { status: response.status, body: text === "" ? undefined : JSON.parse(text) }
  })

const seqOf = (id: string) => Number(id.slice(id.lastIndexOf("-") + 1))

const messageSummary = (messages: ReadonlyArray<{ info: { id: string; role: string }; parts: ReadonlyArray<{ type: string; text?: string }> }>) =>
  messages.map((m) => [m.info.id, m.info.role, m.parts.flatMap((p) => (p.type === "text" ? [p.text] : []))])

describe("skein serve --store postgres, killed mid-turn", () => {
  it.scopedLive("started again on another config dir: the session is listed with the same messages, SSE resumes with no gap or duplicate, a prompt resumes it", () =>
    Effect.gen(function*() {
      const pg = yield* Postgres.start()
      const store = Redacted.value(yield* pg.database("serve_kill"))
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.text("First answer."),
          // The turn the kill lands in: the CLI waits on it.
          FakeModel.withDelay(FakeModel.text("Never heard."), "10 minutes"),
          FakeModel.text("Third answer.")
        ]
      })
      const a = yield* ClaudeCli.offlineDirs("skein-kill-a-")
      const b = yield* ClaudeCli.offlineDirs("skein-kill-b-")
      const cwd = Fs.realpathSync(a.cwd)
      // CLIs the killed server leaves behind are stopped with the test.
      yield* Effect.addFinalizer(() => Effect.sync(() => killIn(cwd)))

      const first = yield* serve({ cwd, configDir: a.configDir, tmpDir: a.tmpDir, store, model: model.url })
      const callA = api(first.url, cwd)
      const session = (yield* callA("POST", "/session", { title: "survivor" })).body as { id: string }
      const before: Array<Frame> = []
      const streamA = yield* Effect.fork(subscribe(first.url, cwd, undefined, (frame) => {
        before.push(frame)
        return false
      }))
      yield* Effect.sleep("500 millis")
      expect((yield* callA("POST", `/session/${session.id}/message`, { parts: [{ type: "text", text: "one" }] })).status).toBe(200)
      const messagesA = (yield* callA("GET", `/session/${session.id}/message`)).body
      expect((yield* callA("POST", `/session/${session.id}/prompt_async`, { parts: [{ type: "text", text: "two" }] })).status).toBe(204)
      // Turn two's request reached the model, which holds its answer: the kill lands mid-turn.
      yield* model.awaitRequest(1, FakeModel.isConversation).pipe(Effect.timeout("60 seconds"))
      yield* Effect.sleep("300 millis")
      yield* first.kill
      yield* streamA.await
      const lastSeen = before.at(-1)!.id

      const second = yield* serve({ cwd, configDir: b.configDir, tmpDir: b.tmpDir, store, model: model.url })
      const callB = api(second.url, cwd)
      const listed = (yield* callB("GET", "/session")).body as ReadonlyArray<{ id: string; title: string }>
      expect(listed.map((s) => [s.id, s.title])).toContainEqual([session.id, "survivor"])
      const messagesB = (yield* callB("GET", `/session/${session.id}/message`)).body
      expect(messageSummary(messagesB)).toEqual(messageSummary(messagesA))

      // The client reconnects with its last id and reads until the next turn (run on the new server) ends.
      const after: Array<Frame> = []
      const streamB = yield* Effect.fork(subscribe(second.url, cwd, lastSeen, (frame) => {
        after.push(frame)
        return frame.type === "session.idle" && frame.properties["sessionID"] === session.id
      }))
      yield* Effect.sleep("500 millis")
      const third = yield* callB("POST", `/session/${session.id}/message`, { parts: [{ type: "text", text: "three" }] })
      expect(third.status).toBe(200)
      yield* streamB.await.pipe(Effect.timeout("60 seconds"))
      const resumed = yield* model.awaitRequest(2, FakeModel.isConversation)
      expect(FakeModel.messagesText(resumed)).toContain("First answer.")

      // The whole log, read from its start by a new client, is what the one client saw across both servers.
      const whole: Array<Frame> = []
      const lastId = after.at(-1)!.id
      yield* subscribe(second.url, cwd, `${lastId.slice(0, lastId.lastIndexOf("-"))}-0`, (frame) => {
        whole.push(frame)
        return frame.id === lastId
      }).pipe(Effect.timeout("60 seconds"))
      const seen = [...before, ...after].map((f) => f.id)
      expect(new Set(seen).size).toBe(seen.length)
      expect(seen).toEqual(whole.map((f) => f.id).slice(whole.findIndex((f) => f.id === seen[0])))
      expect(before.some((f) => f.type === "session.status" && JSON.stringify(f.properties).includes("busy"))).toBe(true)
      expect(after.map((f) => seqOf(f.id))[0]).toBe(seqOf(lastSeen) + 1)
    }), 300_000)
})

/** Kills the processes whose working folder is `dir` (the CLIs a killed server left running). */
const killIn = (dir: string) => {
  for (const name of Fs.readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    try {
      const cwd = Fs.readlinkSync(`/proc/${name}/cwd`)
      if (cwd === dir || cwd.startsWith(`${dir}/`)) process.kill(Number(name), "SIGKILL")
    } catch {
      // Gone already, or not ours to read.
    }
  }
}
