/**
 * Session memory: the throttle alone, then the worker with the real CLI
 * against FakeModel.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { ProcessHost, TaskManager } from "@skein/kernel"
import { MemoryEvents, SessionMemory } from "@skein/memory"
import { Session, Worker } from "@skein/session"
import { ResumeLoader, SummaryCoverage, TranscriptLayout } from "@skein/store"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Layer, Option, Queue } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Live from "./live.js"

const usage = (tokens: number) => ({ inputTokens: tokens, outputTokens: 0, cacheReadInputTokens: 0, cacheCreationInputTokens: 0 })

it("the throttle: a run every N turns, or sooner past the token budget; counters restart after each", () => {
  const config = { ...SessionMemory.defaultConfig, everyTurns: 3, everyTokens: 1000 }
  let since: SessionMemory.Since = { turns: 0, tokens: 0 }
  const dues: Array<boolean> = []
  for (const tokens of [10, 10, 10, 10, 990, 5, 5]) {
    const counted = SessionMemory.count(since, usage(tokens), config)
    dues.push(counted.due)
    since = counted.next
  }
  expect(dues).toEqual([false, false, true, false, true, false, false])
  expect(since).toEqual({ turns: 2, tokens: 10 })
})

const marker = "skein session memory."
const isWorker: FakeModel.RequestMatch = (r) => FakeModel.isConversation(r) && FakeModel.messagesText(r).includes(marker)
const isMain: FakeModel.RequestMatch = (r) => FakeModel.isConversation(r) && !FakeModel.messagesText(r).includes(marker)

describe("SessionMemory e2e with the real CLI", () => {
  it.scopedLive("a worker keeps summary.md, reads it before rewriting it, may touch no other file, records to its sidechain only, and records the point the summary covers", () =>
    Effect.gen(function*() {
      const d = yield* ClaudeCli.offlineDirs("skein-session-memory-")
      const model = yield* FakeModel.make({ replies: [FakeModel.matching(FakeModel.text("Working on it."), isMain)] })
      const tasks = yield* TaskManager.make({ root: Path.join(d.root, "tasks") })
      const stores = yield* Live.stores(d)
      const events = yield* MemoryEvents.make
      const seen = yield* events.subscribe
      const launch = Live.launchOf(model, d)
      const parent = yield* Session.start(launch)
      yield* Effect.flatMap(parent.send("Rename the config loader to loadSettings."), (t) => t.result)
      const memory = yield* Effect.gen(function*() {
        const workers = yield* Worker.pool(parent, { launch })
        return yield* SessionMemory.make({ workers, launch })
      }).pipe(
        Effect.provide(stores),
        Effect.provideService(TaskManager.TaskManager, tasks),
        Effect.provideService(MemoryEvents.MemoryEvents, events)
      )
      const file = yield* memory.summaryFile
      const parentId = yield* parent.sessionId
      expect(file).toBe(Path.join(TranscriptLayout.projectDir(d.configDir, d.cwd), parentId, "session-memory", "summary.md"))
      const first = "# Current state\nRenaming the config loader to loadSettings.\n"
      const second = "# Current state\nThe loader is renamed; tests next.\n"
      yield* model.enqueue(
        FakeModel.matching(FakeModel.toolUse("Write", { file_path: file, content: first }), isWorker),
        FakeModel.matching(FakeModel.text("Summary written."), isWorker)
      )
      yield* memory.update
      expect(Fs.readFileSync(file, "utf8")).toBe(first)
      // The point the summary covers: the parent's leaf when the worker forked.
      const transcript = Session.transcriptPath(d.configDir, d.cwd, parentId)
      const leafOf = Effect.map(ResumeLoader.load(transcript), (view) => view.leafUuid)
      const firstLeaf = yield* leafOf
      expect(firstLeaf).toBeDefined()
      expect(yield* SummaryCoverage.read(file)).toEqual(Option.fromNullable(firstLeaf))
      // A turn the summary has not seen: the record does not move.
      yield* model.enqueue(FakeModel.matching(FakeModel.text("Tests next."), isMain))
      yield* Effect.flatMap(parent.send("Then update the tests."), (t) => t.result)
      const secondLeaf = yield* leafOf
      expect(secondLeaf).not.toBe(firstLeaf)
      expect(yield* SummaryCoverage.read(file)).toEqual(Option.fromNullable(firstLeaf))

      yield* model.enqueue(
        FakeModel.matching(FakeModel.toolUse("Write", { file_path: Path.join(d.cwd, "elsewhere.md"), content: "x" }), isWorker),
        FakeModel.matching(FakeModel.toolUse("Read", { file_path: file }), isWorker),
        FakeModel.matching(FakeModel.toolUse("Write", { file_path: file, content: second }), isWorker),
        FakeModel.matching(FakeModel.text("Summary updated."), isWorker)
      )
      yield* memory.update
      expect(Fs.readFileSync(file, "utf8")).toBe(second)
      expect(yield* SummaryCoverage.read(file)).toEqual(Option.fromNullable(secondLeaf))
      expect(Fs.existsSync(Path.join(d.cwd, "elsewhere.md"))).toBe(false)
      expect((yield* model.remaining).length).toBe(0)

      const all = [...(yield* Queue.takeAll(seen))]
      expect(all.map((e) => e._tag)).toEqual(["Started", "Wrote", "Started", "Wrote"])
      expect(all[3]).toMatchObject({ job: "session-memory", files: [file] })
      // Two isolated workers; the parent's main chain never saw their prompt.
      const records = yield* tasks.list
      expect(records.map((r) => [r.type, r.status])).toEqual([["local_agent", "completed"], ["local_agent", "completed"]])
      const chain = Fs.readFileSync(Session.transcriptPath(d.configDir, d.cwd, parentId), "utf8")
      expect(chain).not.toContain(marker)
      const sidechains = Fs.readdirSync(Path.join(Path.dirname(file), "..", "subagents"))
      expect(sidechains.filter((n) => n.startsWith("agent-session-memory-") && n.endsWith(".jsonl")).length).toBe(2)
    }).pipe(Effect.provide(Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer))), { timeout: 120_000 })
})
