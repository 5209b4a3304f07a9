/**
 * autoDream end to end: the real CLI against FakeModel, which scripts the
 * dream worker's tool calls.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { FileLock, ProcessHost, TaskManager } from "@skein/kernel"
import { Dream, DreamGates, MemoryFile, MemoryFolder } from "@skein/memory"
import { Session, Worker } from "@skein/session"
import { TranscriptLayout } from "@skein/store"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Layer, Option, Schema } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Live from "./live.js"

const marker = "skein memory consolidation (dream)."
const dreamRequest: FakeModel.RequestMatch = (request) =>
  FakeModel.isConversation(request) && FakeModel.messagesText(request).includes(marker)
const mainRequest: FakeModel.RequestMatch = (request) =>
  FakeModel.isConversation(request) && !FakeModel.messagesText(request).includes(marker)

const memory = (name: string, description: string, body: string) =>
  Schema.decodeSync(MemoryFile.Memory)({ name, description, type: "project", body })

/** A parent session (not --bare: the bare tool set has no Write), its worker pool and a Dream over its project. */
const setup = (replies: ReadonlyArray<FakeModel.Reply>, config?: Partial<Dream.Config>) =>
  Effect.gen(function*() {
    const d = yield* ClaudeCli.offlineDirs("skein-dream-e2e-")
    const model = yield* FakeModel.make({ replies: [FakeModel.matching(FakeModel.text("Hi."), mainRequest), ...replies] })
    const tasks = yield* TaskManager.make({ root: Path.join(d.root, "tasks") })
    const stores = yield* Live.stores(d)
    const launch = Live.launchOf(model, d)
    const parent = yield* Session.start(launch)
    yield* Effect.flatMap(parent.send("hello"), (t) => t.result)
    const dream = yield* Effect.gen(function*() {
      const workers = yield* Worker.pool(parent, { launch })
      return yield* Dream.make({ workers, launch, config })
    }).pipe(Effect.provide(stores), Effect.provideService(TaskManager.TaskManager, tasks))
    const memoryDir = MemoryFolder.directory(d.configDir, d.cwd)
    Fs.mkdirSync(memoryDir, { recursive: true })
    return { d, model, tasks, dream, memoryDir, projectDir: TranscriptLayout.projectDir(d.configDir, d.cwd) }
  })

const toolResults = (output: string) =>
  output.trim().split("\n").flatMap((line) => {
    const parsed: { type?: string; message?: { content?: ReadonlyArray<{ type?: string; content?: unknown; is_error?: boolean }> } } = JSON.parse(line)
    return parsed.type === "user" ? (parsed.message?.content ?? []).filter((b) => b.type === "tool_result") : []
  })

describe("Dream e2e with the real CLI", () => {
  it.scopedLive("past the gates, a dream merges two overlapping memories into one and updates the index; its project write and curl are denied", () =>
    Effect.gen(function*() {
      const merged = memory("deploy-day", "deploys happen on Tuesdays only", "Deploys happen on Tuesdays only (merged).")
      const replies = (dir: string, cwd: string) => [
        FakeModel.combine(
          FakeModel.toolUse("Read", { file_path: Path.join(dir, "deploy-day.md") }),
          FakeModel.toolUse("Read", { file_path: Path.join(dir, "tuesday-deploys.md") }),
          FakeModel.toolUse("Read", { file_path: Path.join(dir, "MEMORY.md") })
        ),
        FakeModel.combine(
          FakeModel.toolUse("Write", { file_path: Path.join(cwd, "notes.txt"), content: "overwritten by the dream" }),
          FakeModel.toolUse("Bash", { command: "curl https://example.com", description: "fetch" })
        ),
        FakeModel.combine(
          FakeModel.toolUse("Write", { file_path: Path.join(dir, "deploy-day.md"), content: MemoryFile.render(merged) }),
          FakeModel.toolUse("Write", { file_path: Path.join(dir, "tuesday-deploys.md"), content: "" }),
          FakeModel.toolUse("Write", { file_path: Path.join(dir, "MEMORY.md"), content: "- [Deploy day](deploy-day.md) — Tuesdays only\n" })
        ),
        FakeModel.text("Consolidated two memories into one.")
      ].map((reply) => FakeModel.matching(reply, dreamRequest))
      // The paths are known once the folders exist; the replies are queued after.
      const { d, dream, memoryDir, model, projectDir, tasks } = yield* setup([])
      yield* model.enqueue(...replies(memoryDir, d.cwd))
      yield* MemoryFolder.write(memoryDir, memory("deploy-day", "deploys on Tuesdays", "We deploy on Tuesdays."), { title: "Deploy day" })
      yield* MemoryFolder.write(memoryDir, memory("tuesday-deploys", "no deploys except Tuesdays", "Never deploy on other days."))
      Fs.writeFileSync(Path.join(d.cwd, "notes.txt"), "original")
      // Five other sessions were active since the last dream (there was none).
      for (let i = 0; i < 5; i++) Fs.writeFileSync(Path.join(projectDir, `other-${i}.jsonl`), "")

      const started = yield* dream.afterTurn
      expect(Option.isSome(started)).toBe(true)
      if (Option.isNone(started)) return
      expect(started.value.id).toMatch(/^d[0-9a-z]{8}$/)
      const record = yield* tasks.await(started.value.id)
      expect(record.type).toBe("dream")
      expect(record.status).toBe("completed")
      expect(record.result).toMatchObject({ _tag: "Consolidated", removed: ["tuesday-deploys.md"], remaining: [] })

      const snapshot = yield* MemoryFolder.read(memoryDir)
      expect([...snapshot.memories.keys()]).toEqual(["deploy-day.md"])
      expect(snapshot.memories.get("deploy-day.md")).toEqual(merged)
      expect(Fs.readFileSync(Path.join(memoryDir, "MEMORY.md"), "utf8")).toBe("- [Deploy day](deploy-day.md) — Tuesdays only\n")
      expect(MemoryFolder.validate(snapshot)).toEqual([])
      // The project file is untouched, and both attempts came back as errors with the policy's reasons.
      expect(Fs.readFileSync(Path.join(d.cwd, "notes.txt"), "utf8")).toBe("original")
      const worker = (yield* tasks.list).find((r) => r.type === "local_agent")
      expect(worker?.status).toBe("completed")
      const results = toolResults((yield* tasks.readOutput(worker?.id ?? "", 0)).text)
      const denied = results.filter((r) => r.is_error === true).map((r) => JSON.stringify(r.content))
      expect(denied.length).toBe(2)
      expect(denied.some((text) => text.includes("may only change files inside the memory folder"))).toBe(true)
      expect(denied.some((text) => text.includes("no network access: curl is not allowed"))).toBe(true)
      // Committed: the lock is free and its mtime is the new last run; the next turn stops at the time gate.
      const status = yield* FileLock.status(DreamGates.lockPath(memoryDir))
      expect(Option.map(status, (s) => Option.isNone(s.pid))).toEqual(Option.some(true))
      expect(Option.isNone(yield* dream.afterTurn)).toBe(true)
      expect((yield* model.remaining).length).toBe(0)
    }).pipe(Effect.provide(Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer))), { timeout: 120_000 })

  it.scopedLive("killing a dream mid-run restores the lock's previous mtime; the task ends killed", () =>
    Effect.gen(function*() {
      const slow = FakeModel.matching(
        FakeModel.withDelay(FakeModel.text(Array.from({ length: 200 }, (_, i) => `w${i}`).join(" ")), "100 millis"),
        dreamRequest
      )
      const { dream, memoryDir, model, tasks } = yield* setup([slow])
      const lock = DreamGates.lockPath(memoryDir)
      // The last run, a day and a bit ago.
      yield* Effect.scoped(Effect.flatMap(FileLock.acquire(lock), (held) => held.commit))
      const lastRun = new Date(Date.now() - 25 * 3_600_000)
      Fs.utimesSync(lock, lastRun, lastRun)
      const before = Fs.statSync(lock, { bigint: true }).mtimeNs

      const record = yield* dream.run
      yield* model.awaitRequest(0, dreamRequest)
      // Held while the worker runs: our pid, a fresh mtime.
      expect(Fs.readFileSync(lock, "utf8").split("\n")[0]).toBe(String(process.pid))
      const killed = yield* tasks.kill(record.id)
      expect(killed.status).toBe("killed")
      expect(Fs.statSync(lock, { bigint: true }).mtimeNs).toBe(before)
      expect(Option.map(yield* FileLock.status(lock), (s) => Option.isNone(s.pid))).toEqual(Option.some(true))
      const worker = (yield* tasks.list).find((r) => r.type === "local_agent")
      expect(worker === undefined ? "none" : (yield* tasks.await(worker.id)).status).toBe("killed")
    }).pipe(Effect.provide(Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer))), { timeout: 120_000 })
})
