/**
 * An `AskUserQuestion` question across runner processes: two socket runners
 * over one Postgres, each its own OS process and config dir, the real CLI
 * (without `--bare`, where the tool exists) and FakeModel. A session whose
 * entity, and so whose CLI, runs on runner B asks a question during a turn
 * prompted through runner A; A's edge announces it, lists it and takes the
 * answer, which reaches B's CLI through the session's entity, and the turn
 * completes with the answer in the model's next request. A second answer,
 * through B, is a 404, and no question is left pending on either edge.
 */
import { describe, expect, it } from "@effect/vitest"
import { ClaudeCli, FakeModel, Postgres } from "@skein/testkit"
import { Effect, Option, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Processes from "./processes.js"

const token = "cluster-token-0123456789"

/** The request answers a tool call: its last user message carries a `tool_result`. */
const afterTool = (request: FakeModel.RecordedRequest) =>
  Option.match(request.messagesRequest, {
    onNone: () => false,
    onSome: (body) => {
      const last = body.messages.findLast((m) => m.role === "user")
      return last !== undefined && typeof last.content !== "string" && last.content.some((block) => block.type === "tool_result")
    }
  })

const hasTranscript = (configDir: string, cliSessionId: string) => {
  const projects = Path.join(configDir, "projects")
  return Fs.existsSync(projects) && Fs.readdirSync(projects).some((dir) => Fs.existsSync(Path.join(projects, dir, `${cliSessionId}.jsonl`)))
}

const colorQuestion = {
  questions: [{
    question: "Which color?",
    header: "Color",
    options: [{ label: "Red", description: "warm" }, { label: "Blue", description: "cool" }],
    multiSelect: false
  }]
}

describe("a question across runner processes", () => {
  it.scopedLive("asked by a session hosted on B, answered through A's edge: B's CLI gets the answer and the turn completes", () =>
    Effect.gen(function*() {
      const pg = yield* Postgres.start()
      const database = Redacted.value(yield* pg.database("cluster"))
      const model = yield* FakeModel.make({
        fallback: (request) =>
          !FakeModel.isConversation(request)
            ? FakeModel.text("A side answer.")
            : afterTool(request)
            ? FakeModel.text("Blue it is.")
            : FakeModel.promptOf(request).includes("Ask me")
            ? FakeModel.toolUse("AskUserQuestion", colorQuestion)
            : FakeModel.text(`Answer to ${FakeModel.promptOf(request)}.`)
      })
      const shared = yield* ClaudeCli.offlineDirs("skein-cluster-question-")
      const cwd = Fs.realpathSync(shared.cwd)
      const runners = yield* Effect.forEach(["a", "b"], (name, i) =>
        Processes.spawnRunner({
          database,
          ...Processes.runnerDirs(shared.root, name),
          cwd,
          modelUrl: model.url,
          runnerPort: 34541 + i,
          token,
          runner: "Socket",
          bare: false
        }))
      const [a, b] = runners as [Processes.RunnerProcess, Processes.RunnerProcess]
      // Until each runner holds its own shards, a session's entity may still move (and its turn end RunnerLost).
      yield* Processes.awaitShardsSettled(database, runners)
      const callA = Processes.api(a.url, token)
      const callB = Processes.api(b.url, token)
      const inDir = `directory=${encodeURIComponent(cwd)}`

      // Sessions created and prompted through A until one runs on B (placed by shard: its transcript is on B's disk only).
      // A session whose first turn fails all the same is passed over.
      let onB: { readonly id: string; readonly cliSessionId: string } | undefined
      for (let tries = 0; onB === undefined && tries < 12; tries++) {
        const session = yield* Effect.promise(() => callA("POST", `/session?${inDir}`, {}))
        const first = yield* Effect.promise(() =>
          callA("POST", `/session/${session.id}/message`, { parts: [{ type: "text", text: `first of ${session.id}` }] }).then(
            () => "answered",
            (e: Error) => e.message
          )
        )
        if (first === "answered" && hasTranscript(b.config.configDir, session.cliSessionId)) onB = session
        else yield* Effect.promise(() => callA("DELETE", `/session/${session.id}`).catch(() => undefined))
      }
      expect(onB).toBeDefined()
      const session = onB!
      expect(hasTranscript(a.config.configDir, session.cliSessionId)).toBe(false)

      const watch = Processes.subscribe(a.url, token, cwd)
      yield* Effect.promise(() => watch.until((f) => f.type === "server.connected", 10_000))
      yield* Effect.promise(() => callA("POST", `/session/${session.id}/prompt_async`, { parts: [{ type: "text", text: "Ask me" }] }))
      const asked = yield* Effect.promise(() => watch.until((f) => f.type === "question.asked" && f.properties["sessionID"] === session.id))
      const requestID = String(asked.find((f) => f.type === "question.asked" && f.properties["sessionID"] === session.id)!.properties["id"])
      expect(requestID).toMatch(/^que_/)

      // A lists B's question (from the ask ledger) and takes its answer.
      const listed: ReadonlyArray<{ id: string }> = yield* Effect.promise(() => callA("GET", `/question?${inDir}`))
      expect(listed.map((q) => q.id)).toEqual([requestID])
      const status: Record<string, { type: string }> = yield* Effect.promise(() => callA("GET", `/session/status?${inDir}`))
      expect(status[session.id]).toEqual({ type: "busy" })
      yield* Effect.promise(() => callA("POST", `/question/${requestID}/reply?${inDir}`, { answers: [["Blue"]] }))

      const seen = yield* Effect.promise(() => watch.until((f) => f.type === "session.idle" && f.properties["sessionID"] === session.id))
      watch.close()
      const ofSession = seen.filter((f) => f.properties["sessionID"] === session.id)
      expect(ofSession.find((f) => f.type === "question.replied")?.properties).toMatchObject({ requestID })
      expect(ofSession.filter((f) => f.type === "session.error")).toEqual([])
      const followUp = yield* model.awaitRequest(0, (r) => FakeModel.isConversation(r) && afterTool(r))
      expect(JSON.stringify(followUp.body)).toContain(String.raw`\"Which color?\"=\"Blue\"`)
      const messages: ReadonlyArray<{ parts: ReadonlyArray<{ type: string; text?: string }> }> = yield* Effect.promise(() =>
        callA("GET", `/session/${session.id}/message?${inDir}`)
      )
      expect(messages.flatMap((m) => m.parts).flatMap((p) => (p.type === "text" && p.text !== undefined ? [p.text] : []))).toContain("Blue it is.")

      // Answered once: again, through B, is not found; neither edge lists it.
      const again = yield* Effect.promise(() =>
        callB("POST", `/question/${requestID}/reply?${inDir}`, { answers: [["Red"]] }).then(() => "answered", (e: Error) => e.message)
      )
      expect(again).toContain("404")
      expect(yield* Effect.promise(() => callA("GET", `/question?${inDir}`))).toEqual([])
      expect(yield* Effect.promise(() => callB("GET", `/question?${inDir}`))).toEqual([])
    }), { timeout: 240_000 })
})
