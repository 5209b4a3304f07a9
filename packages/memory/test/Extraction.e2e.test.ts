/**
 * Memory extraction end to end: the real CLI against FakeModel, which
 * scripts the worker's tool calls. What skein wrote is then loaded by a new,
 * plain CLI session of the same project: the proof is in FakeModel's
 * request log.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { ProcessHost, TaskManager } from "@skein/kernel"
import { Extraction, ExtractionCursor, MemoryEvents, MemoryFile, MemoryFolder } from "@skein/memory"
import { Session, Worker } from "@skein/session"
import { TranscriptLayout } from "@skein/store"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Layer, Option, Queue, Schema } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Live from "./live.js"

const marker = "skein memory extraction."

/** A conversation request of the extraction worker (its prompt is in the history). */
const extractionRequest: FakeModel.RequestMatch = (request) =>
  FakeModel.isConversation(request) && FakeModel.messagesText(request).includes(marker)

const mainRequest = (word: string): FakeModel.RequestMatch => (request) =>
  FakeModel.isConversation(request) && !FakeModel.messagesText(request).includes(marker) &&
  FakeModel.messagesText(request).includes(word)

const systemText = (request: FakeModel.RecordedRequest): string =>
  Option.match(request.messagesRequest, {
    onNone: () => "",
    onSome: (body) => typeof body.system === "string" ? body.system : JSON.stringify(body.system ?? "")
  })

describe("Extraction e2e with the real CLI", () => {
  it.scopedLive("an extraction writes a memory file and its index line; a new plain session has the memory in its context", () =>
    Effect.gen(function*() {
      const d = yield* ClaudeCli.offlineDirs("skein-memory-e2e-")
      const memoryDir = MemoryFolder.directory(d.configDir, d.cwd)
      const memoryFile = Path.join(memoryDir, "deploy-day.md")
      const memory = Schema.decodeSync(MemoryFile.Memory)({
        name: "deploy-day",
        description: "the team deploys on Tuesdays only",
        type: "project",
        body: "Deploys happen on Tuesdays only.\n\n**Why:** the on-call rota.\n**How to apply:** never propose a deploy on another day."
      })
      const indexLine = "- [Deploy day](deploy-day.md) — deploys on Tuesdays only (ZEBRA-INDEX)"
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.matching(FakeModel.text("Noted: Tuesdays."), mainRequest("Tuesdays")),
          FakeModel.matching(FakeModel.toolUse("Write", { file_path: memoryFile, content: MemoryFile.render(memory) }), extractionRequest),
          FakeModel.matching(FakeModel.toolUse("Write", { file_path: Path.join(memoryDir, "MEMORY.md"), content: `${indexLine}\n` }), extractionRequest),
          FakeModel.matching(FakeModel.text("Saved one memory."), extractionRequest),
          FakeModel.matching(FakeModel.text("Hello again."), mainRequest("new-session-hello"))
        ]
      })
      const tasks = yield* TaskManager.make({ root: Path.join(d.root, "tasks") })
      const stores = yield* Live.stores(d)
      const events = yield* MemoryEvents.make
      const seen = yield* events.subscribe
      // Not --bare: the bare tool set has no Write.
      const launch = Live.launchOf(model, d)
      const parent = yield* Session.start(launch)
      yield* Effect.flatMap(parent.send("Remember: we deploy on Tuesdays only."), (t) => t.result)
      const parentId = yield* parent.sessionId

      const extraction = yield* Effect.gen(function*() {
        const workers = yield* Worker.pool(parent, { launch })
        return yield* Extraction.make({ workers, launch })
      }).pipe(
        Effect.provide(stores),
        Effect.provideService(TaskManager.TaskManager, tasks),
        Effect.provideService(MemoryEvents.MemoryEvents, events)
      )
      expect(extraction.memoryDir).toBe(memoryDir)
      yield* extraction.extract

      expect(Fs.existsSync(memoryFile)).toBe(true)
      const snapshot = yield* MemoryFolder.read(memoryDir)
      expect(snapshot.memories.get("deploy-day.md")).toEqual(memory)
      expect(Fs.readFileSync(Path.join(memoryDir, "MEMORY.md"), "utf8")).toBe(`${indexLine}\n`)
      expect(MemoryFolder.validate(snapshot)).toEqual([])
      const all = yield* Queue.takeAll(seen)
      expect([...all].map((e) => e._tag)).toEqual(["Started", "Wrote"])
      expect([...all][1]).toMatchObject({ files: ["MEMORY.md", "deploy-day.md"], removed: [], repaired: [], remaining: [] })
      // Three worker requests, all answered by the script; the worker ran as an isolated local_agent task.
      expect((yield* model.remaining).length).toBe(1)
      const records = yield* tasks.list
      expect(records.map((r) => [r.type, r.status])).toEqual([["local_agent", "completed"]])

      // The cursor is the last message the run saw; a second run finds nothing new and forks nothing.
      const cursor = yield* ExtractionCursor.load(ExtractionCursor.file(TranscriptLayout.projectDir(d.configDir, d.cwd), parentId))
      expect(Option.isSome(cursor)).toBe(true)
      yield* extraction.extract
      expect([...(yield* Queue.takeAll(seen))]).toEqual([
        { _tag: "Skipped", job: "extraction", sessionId: parentId, gate: "cursor", reason: "no new messages" }
      ])
      expect((yield* tasks.list).length).toBe(1)

      // A new, plain session (no --bare) of the same project: the CLI loads MEMORY.md into its context.
      const before = (yield* model.requests).length
      const fresh = yield* Session.start(Live.launchOf(model, d))
      yield* Effect.flatMap(fresh.send("new-session-hello"), (t) => t.result)
      const first = (yield* model.requests).slice(before).find(mainRequest("new-session-hello"))
      expect(first).toBeDefined()
      if (first === undefined) return
      expect(systemText(first)).toContain(`persistent file-based memory at \`${memoryDir}/\``)
      const context = FakeModel.messagesText(first)
      expect(context).toContain(`Contents of ${Path.join(memoryDir, "MEMORY.md")}`)
      expect(context).toContain(indexLine)
    }).pipe(Effect.provide(Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer))), { timeout: 120_000 })

  it.scopedLive("skipped when the main agent wrote memory itself; 10 requests during a run give one trailing run; the cursor survives a restart", () =>
    Effect.gen(function*() {
      const d = yield* ClaudeCli.offlineDirs("skein-memory-e2e-")
      const memoryDir = MemoryFolder.directory(d.configDir, d.cwd)
      const own = Schema.decodeSync(MemoryFile.Memory)({ name: "tabs", description: "the user indents with tabs", type: "feedback", body: "Tabs." })
      const slow = FakeModel.withDelay(FakeModel.text(Array.from({ length: 60 }, (_, i) => `w${i}`).join(" ")), "20 millis")
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.matching(FakeModel.toolUse("Write", { file_path: Path.join(memoryDir, "tabs.md"), content: MemoryFile.render(own) }), mainRequest("tabs")),
          FakeModel.matching(FakeModel.text("Saved it myself."), mainRequest("tabs")),
          FakeModel.matching(FakeModel.text("Noted: Fridays."), mainRequest("Fridays")),
          FakeModel.matching(slow, extractionRequest)
        ]
      })
      const tasks = yield* TaskManager.make({ root: Path.join(d.root, "tasks") })
      const stores = yield* Live.stores(d)
      const events = yield* MemoryEvents.make
      const seen = yield* events.subscribe
      const launch = Live.launchOf(model, d)
      const parent = yield* Session.start(launch)
      const provide = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        effect.pipe(
          Effect.provide(stores),
          Effect.provideService(TaskManager.TaskManager, tasks),
          Effect.provideService(MemoryEvents.MemoryEvents, events)
        )
      const workers = yield* provide(Worker.pool(parent, { launch }))
      const extraction = yield* provide(Extraction.make({ workers, launch }))
      const parentId = yield* Effect.flatMap(parent.send("Remember that I use tabs."), (t) => Effect.zipRight(t.result, parent.sessionId))

      // The main agent saved it itself: no worker.
      yield* extraction.extract
      expect([...(yield* Queue.takeAll(seen))]).toMatchObject([{ _tag: "Skipped", gate: "main-agent" }])
      expect(yield* tasks.list).toEqual([])

      // One slow run; ten more requests while it runs owe exactly one trailing run.
      yield* Effect.flatMap(parent.send("No deploys on Fridays."), (t) => t.result)
      expect(yield* extraction.request).toBe("started")
      yield* model.awaitRequest(0, extractionRequest)
      const answers = yield* Effect.forEach(Array.from({ length: 10 }), () => extraction.request)
      expect(new Set(answers)).toEqual(new Set(["stashed"]))
      yield* extraction.idle
      const runs = [...(yield* Queue.takeAll(seen))]
      expect(runs.map((e) => e._tag)).toEqual(["Started", "Wrote", "Skipped"])
      expect(runs[2]).toMatchObject({ gate: "cursor", reason: "no new messages" })
      expect((yield* tasks.list).length).toBe(1)

      // A restart: a new Extraction over the same session reads the saved cursor and finds nothing new.
      const again = yield* provide(Extraction.make({ workers, launch }))
      yield* again.extract
      expect([...(yield* Queue.takeAll(seen))]).toMatchObject([{ _tag: "Skipped", gate: "cursor", sessionId: parentId }])
      expect((yield* tasks.list).length).toBe(1)
    }).pipe(Effect.provide(Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer))), { timeout: 120_000 })
})
