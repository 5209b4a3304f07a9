/**
 * The cluster on one machine: a single runner process over sqlite, the
 * real CLI and FakeModel. The process is SIGKILLed mid-turn and started
 * again: an SSE client reconnecting with its `Last-Event-ID` sees the cut
 * turn end with `RunnerLost` (the redelivered prompt is not run again), the
 * next prompt is answered with the first turn in FakeModel's request, and
 * the transcript has the first turn once.
 */
import { describe, expect, it } from "@effect/vitest"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Processes from "./processes.js"

const token = "cluster-token-0123456789"

const api = (url: string) => Processes.api(url, token)

describe("a single runner over sqlite, restarted", () => {
  it.scopedLive("SIGKILL mid-turn, restart: RunnerLost on the reconnected SSE client, then the session goes on with its history", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        fallback: (request) =>
          FakeModel.promptOf(request).includes("slow")
            ? FakeModel.withDelay(FakeModel.text("Cut short by the crash."), "60 seconds")
            : FakeModel.text(`Answer to ${FakeModel.promptOf(request)}.`)
      })
      const dirs = yield* ClaudeCli.offlineDirs("skein-cluster-single-")
      const cwd = Fs.realpathSync(dirs.cwd)
      const config = {
        database: `sqlite:${Path.join(dirs.root, "cluster.db")}`,
        configDir: dirs.configDir,
        tmpDir: dirs.tmpDir,
        cwd,
        modelUrl: model.url,
        runnerPort: 0,
        token,
        runner: "Single" as const
      }
      const first = yield* Processes.spawnRunner(config)
      const call = api(first.url)
      const session = yield* Effect.promise(() => call("POST", `/session?directory=${encodeURIComponent(cwd)}`, {}))
      const reply = yield* Effect.promise(() => call("POST", `/session/${session.id}/message`, { parts: [{ type: "text", text: "the first turn" }] }))
      expect(JSON.stringify(reply)).toContain("Answer to the first turn.")

      const watcher = Processes.subscribe(first.url, token, cwd)
      yield* Effect.promise(() => watcher.until((f) => f.type === "server.connected", 10_000))
      yield* Effect.promise(() => call("POST", `/session/${session.id}/prompt_async`, { parts: [{ type: "text", text: "a slow second turn" }] }))
      yield* model.awaitRequest(0, (r) => FakeModel.isConversation(r) && FakeModel.promptOf(r).includes("slow"))
      yield* Effect.promise(() => watcher.until((f) => f.type === "session.status" && f.properties["sessionID"] === session.id))
      yield* Processes.kill(first)
      const lastId = watcher.frames.at(-1)!.id
      watcher.close()

      const second = yield* Processes.spawnRunner(config)
      const moved = Processes.subscribe(second.url, token, cwd, lastId)
      const seen = yield* Effect.promise(() =>
        moved.until((f) => Processes.errorName(f) === "RunnerLost" && f.properties["sessionID"] === session.id, 90_000)
      )
      expect(seen.filter((f) => f.type === "session.error").map(Processes.errorName)).toEqual(["RunnerLost"])
      const conversations = (yield* model.requests).filter(FakeModel.isConversation)
      expect(conversations.filter((r) => FakeModel.promptOf(r).includes("slow")).length).toBe(1)

      const third = yield* Effect.promise(() =>
        api(second.url)("POST", `/session/${session.id}/message`, { parts: [{ type: "text", text: "third, after the restart" }] })
      )
      expect(JSON.stringify(third)).toContain("Answer to third, after the restart.")
      const request = yield* model.awaitRequest(0, (r) => FakeModel.isConversation(r) && FakeModel.promptOf(r).includes("third, after the restart"))
      expect(FakeModel.messagesText(request)).toContain("Answer to the first turn.")
      moved.close()

      const seqs = [...watcher.frames, ...moved.frames].filter((f) => !f.type.startsWith("server.")).map((f) => Number(f.id.split("-").at(-1)))
      expect(new Set(seqs).size).toBe(seqs.length)
      for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBeGreaterThan(seqs[i - 1]!)
      const projects = Path.join(dirs.configDir, "projects")
      const transcript = Fs.readdirSync(projects).flatMap((d) => {
        const file = Path.join(projects, d, `${session.cliSessionId}.jsonl`)
        return Fs.existsSync(file) ? [Fs.readFileSync(file, "utf8")] : []
      })[0]!
      expect(transcript.split("\n").filter((l) => l.includes("\"type\":\"user\"") && l.includes("the first turn")).length).toBe(1)
    }), 240_000)
})
