/**
 * Three cluster runners as three OS processes on 127.0.0.1 (each its own
 * config dir, as three machines), one Postgres, the real CLI and FakeModel:
 * sessions created through runner A land on all three runners by shard; the
 * runner hosting a session is SIGKILLed mid-turn and an SSE client on runner
 * B sees that turn end with `RunnerLost`; a new prompt through runner C is
 * answered with the earlier turns in FakeModel's request; the transcript on
 * the new runner has the first turn once; and an SSE client that moves from
 * B to C with its `Last-Event-ID` misses nothing and sees nothing twice.
 * Before the kill, a permission ask of the session hosted on B is listed on
 * A's edge, the session is busy in A's status, and the reply sent to A
 * reaches B's CLI (the tool runs); a second reply, through C, is a 404.
 */
import { describe, expect, it } from "@effect/vitest"
import { ClaudeCli, FakeModel, Postgres } from "@skein/testkit"
import { Effect, Option, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Processes from "./processes.js"

const token = "cluster-token-0123456789"

const api = (url: string) => Processes.api(url, token)

/** The transcripts (JSONL of the main chain) under a config dir, by CLI session id. */
const transcriptOf = (configDir: string, cliSessionId: string) => {
  const projects = Path.join(configDir, "projects")
  if (!Fs.existsSync(projects)) return undefined
  for (const dir of Fs.readdirSync(projects)) {
    const file = Path.join(projects, dir, `${cliSessionId}.jsonl`)
    if (Fs.existsSync(file)) return Fs.readFileSync(file, "utf8")
  }
  return undefined
}

const userPrompts = (jsonl: string, text: string) =>
  jsonl.split("\n").filter((line) => line.includes("\"type\":\"user\"") && line.includes(text)).length

/** The request answers a tool call: its last user message carries a `tool_result`. */
const afterTool = (request: FakeModel.RecordedRequest) =>
  Option.match(request.messagesRequest, {
    onNone: () => false,
    onSome: (body) => {
      const last = body.messages.findLast((m) => m.role === "user")
      return last !== undefined && typeof last.content !== "string" && last.content.some((block) => block.type === "tool_result")
    }
  })

describe("three runners over Postgres", () => {
  it.scopedLive("sessions spread by shard; a SIGKILLed host's turn ends RunnerLost on another runner's SSE; the session goes on elsewhere", () =>
    Effect.gen(function*() {
      const pg = yield* Postgres.start()
      const database = Redacted.value(yield* pg.database("cluster"))
      const model = yield* FakeModel.make({
        fallback: (request) =>
          afterTool(request)
            ? FakeModel.text("Made.")
            : FakeModel.promptOf(request).includes("make the file")
            ? FakeModel.toolUse("Bash", { command: "touch made-across-runners.txt" })
            : FakeModel.promptOf(request).includes("slow")
            ? FakeModel.withDelay(FakeModel.text("Cut short by the crash."), "60 seconds")
            : FakeModel.text(`Answer to ${FakeModel.promptOf(request)}.`)
      })
      const shared = yield* ClaudeCli.offlineDirs("skein-cluster-e2e-")
      const cwd = Fs.realpathSync(shared.cwd)
      const ports = [34531, 34532, 34533]
      const runners = yield* Effect.forEach(["a", "b", "c"], (name, i) =>
        Processes.spawnRunner({
          database,
          ...Processes.runnerDirs(shared.root, name),
          cwd,
          modelUrl: model.url,
          runnerPort: ports[i]!,
          token,
          runner: "Socket"
        }), { concurrency: "unbounded" })
      const [a, b, c] = runners as [Processes.RunnerProcess, Processes.RunnerProcess, Processes.RunnerProcess]
      // Where a session runs is read from where its first turn ran: only true once the shards stop moving
      // (runners listen before they have seen each other; a shard, and the session with it, could move
      // after its first turn, and the runner killed below would not be the one running the turn).
      const spawnedAt = Date.now()
      yield* Processes.awaitShardsSettled(database, runners)
      yield* Effect.log(`shards settled ${Date.now() - spawnedAt} ms after the runners listened`)

      // Sessions created through A and prompted through A until one has run on each runner (placed by
      // shard: its CLI, and so its transcript, is on the disk of the runner holding the shard, and no other).
      const callA = api(a.url)
      const startedAt = Date.now()
      const placed = new Map<Processes.RunnerProcess, { id: string; cliSessionId: string }>()
      let created = 0
      while (placed.size < 3 && created < 15) {
        created++
        const session = yield* Effect.promise(() => callA("POST", `/session?directory=${encodeURIComponent(cwd)}`, {}))
        const reply = yield* Effect.promise(() => callA("POST", `/session/${session.id}/message`, { parts: [{ type: "text", text: `first of ${session.id}` }] }))
        expect(JSON.stringify(reply)).toContain(`Answer to first of ${session.id}.`)
        const hosts = runners.filter((r) => transcriptOf(r.config.configDir, session.cliSessionId) !== undefined)
        expect(hosts.length).toBe(1)
        if (placed.has(hosts[0]!)) yield* Effect.promise(() => callA("DELETE", `/session/${session.id}`))
        else placed.set(hosts[0]!, { id: session.id, cliSessionId: session.cliSessionId })
      }
      expect(placed.size).toBe(3)

      // An ask of the session hosted on B, through A's edge: listed there, busy there, answered there.
      const onB = placed.get(b)!
      const inDir = `directory=${encodeURIComponent(cwd)}`
      const askWatch = Processes.subscribe(a.url, token, cwd)
      yield* Effect.promise(() => askWatch.until((f) => f.type === "server.connected", 10_000))
      yield* Effect.promise(() => callA("POST", `/session/${onB.id}/prompt_async`, { parts: [{ type: "text", text: "make the file" }] }))
      const asked = yield* Effect.promise(() =>
        askWatch.until((f) => f.type === "permission.asked" && f.properties["sessionID"] === onB.id)
      )
      const requestID = String(asked.find((f) => f.type === "permission.asked" && f.properties["sessionID"] === onB.id)!.properties["id"])
      const listed: ReadonlyArray<{ id: string }> = yield* Effect.promise(() => callA("GET", `/permission?${inDir}`))
      expect(listed.map((p) => p.id)).toContain(requestID)
      const status: Record<string, { type: string }> = yield* Effect.promise(() => callA("GET", `/session/status?${inDir}`))
      expect(status[onB.id]).toEqual({ type: "busy" })
      yield* Effect.promise(() => callA("POST", `/permission/${requestID}/reply?${inDir}`, { reply: "once" }))
      yield* Effect.promise(() => askWatch.until((f) => f.type === "session.idle" && f.properties["sessionID"] === onB.id))
      askWatch.close()
      expect(Fs.existsSync(Path.join(cwd, "made-across-runners.txt"))).toBe(true)
      const again = yield* Effect.promise(() =>
        api(c.url)("POST", `/permission/${requestID}/reply?${inDir}`, { reply: "once" }).then(() => "answered", (e: Error) => e.message)
      )
      expect(again).toContain("404")

      // The session hosted on A: a slow turn through B, A killed mid-turn.
      const victim = placed.get(a)!
      const watcher = Processes.subscribe(b.url, token, cwd)
      yield* Effect.promise(() => watcher.until((f) => f.type === "server.connected" || f.id !== "", 10_000).catch(() => []))
      const callB = api(b.url)
      yield* Effect.promise(() => callB("POST", `/session/${victim.id}/prompt_async`, { parts: [{ type: "text", text: "a slow second turn" }] }))
      yield* model.awaitRequest(0, (r) => FakeModel.isConversation(r) && FakeModel.promptOf(r).includes("slow"))
      yield* Effect.promise(() => watcher.until((f) => f.type === "session.status" && f.properties["sessionID"] === victim.id))
      expect(yield* Processes.turnRunnerPid(database, victim.id)).toBe(a.child.pid) // the turn runs on the runner killed
      const killedAt = Date.now()
      yield* Processes.kill(a)
      const seen = yield* Effect.promise(() =>
        watcher.until((f) => Processes.errorName(f) === "RunnerLost" && f.properties["sessionID"] === victim.id, 90_000)
      )
      const failover = Date.now() - killedAt
      const turnEnd = seen.filter((f) => f.properties["sessionID"] === victim.id && f.type === "session.error").map(Processes.errorName)
      expect(turnEnd).toEqual(["RunnerLost"])
      yield* Effect.log(`failover: RunnerLost on B ${failover} ms after the kill; ${created} sessions placed in ${killedAt - startedAt} ms`)

      // The SSE client moves from B to C with its Last-Event-ID.
      const lastId = watcher.frames.at(-1)!.id
      watcher.close()
      const moved = Processes.subscribe(c.url, token, cwd, lastId)
      const callC = api(c.url)
      const third = yield* Effect.promise(() => callC("POST", `/session/${victim.id}/message`, { parts: [{ type: "text", text: "third, after the crash" }] }))
      expect(JSON.stringify(third)).toContain("Answer to third, after the crash.")
      const request = yield* model.awaitRequest(0, (r) => FakeModel.isConversation(r) && FakeModel.promptOf(r).includes("third, after the crash"))
      expect(FakeModel.messagesText(request)).toContain(`Answer to first of ${victim.id}.`)
      yield* Effect.promise(() => moved.until((f) => f.type === "session.idle" && f.properties["sessionID"] === victim.id))
      moved.close()

      // Nothing missed, nothing twice: B's frames then C's are one gap-free run of the log's seqs.
      // (The server's own frames, `server.connected` and heartbeats, carry the cursor they were sent at.)
      const seqs = [...watcher.frames, ...moved.frames].filter((f) => !f.type.startsWith("server.")).map((f) => Number(f.id.split("-").at(-1)))
      expect(new Set(seqs).size).toBe(seqs.length)
      for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBeGreaterThan(seqs[i - 1]!)

      // The new host restored the transcript: the first turn is there once.
      const newHost = [b, c].find((r) => transcriptOf(r.config.configDir, victim.cliSessionId) !== undefined)!
      expect(newHost).toBeDefined()
      const transcript = transcriptOf(newHost.config.configDir, victim.cliSessionId)!
      expect(userPrompts(transcript, `first of ${victim.id}`)).toBe(1)
      expect(userPrompts(transcript, "third, after the crash")).toBe(1)
    }), { timeout: 300_000 })
})
