/**
 * Forked workers end to end: the real Claude Code CLI against FakeModel.
 * Replies are routed between the parent and its workers by a marker in each
 * prompt, and every claim is checked against what the CLIs did: the requests
 * FakeModel received, processes by pid, and files on disk.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { TaskManager } from "@skein/kernel"
import { SessionIndex, TranscriptLayout, TranscriptStore } from "@skein/store"
import { FakeModel } from "@skein/testkit"
import { Deferred, type Duration, Effect, Fiber, Layer, Option, Schedule } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Permissions from "../src/Permissions.js"
import * as Session from "../src/Session.js"
import * as Worker from "../src/Worker.js"
import * as Live from "./live.js"

type Block = { readonly [key: string]: unknown }
type Message = { readonly role: string; readonly content: ReadonlyArray<Block> }

const body = (request: FakeModel.RecordedRequest) => Option.getOrThrow(request.messagesRequest)

/**
 * A request's messages for prefix comparison: string contents as text blocks,
 * without cache_control marks and without the `role: "system"` message of
 * request settings the CLI adds (neither is part of the conversation).
 */
const normalized = (request: FakeModel.RecordedRequest): ReadonlyArray<Message> =>
  body(request).messages.filter((message) => message.role !== "system").map((message) => ({
    role: message.role,
    content: typeof message.content === "string"
      ? [{ type: "text", text: message.content }]
      : message.content.map((block): Block => {
        const { cache_control: _, ...rest }: Block = block
        return rest
      })
  }))

const lastUserText = (request: FakeModel.RecordedRequest): string => {
  const last = normalized(request).at(-1)
  return last === undefined ? "" : last.content.flatMap((b) => typeof b["text"] === "string" ? [b["text"]] : []).join("\n")
}

/** A conversation request whose last user message carries `marker`. */
const asking = (marker: string): FakeModel.RequestMatch => (request) =>
  FakeModel.isConversation(request) && lastUserText(request).includes(marker)

const reply = (marker: string, text: string, delay?: Duration.DurationInput) =>
  FakeModel.matching(delay === undefined ? FakeModel.text(text) : FakeModel.withDelay(FakeModel.text(text), delay), asking(marker))

const longText = (n: number) => Array.from({ length: n }, (_, i) => `word${i}`).join(" ")

/** TaskManager, TranscriptStore and SessionIndex over the test's config folder, and the parent's launch options. */
const setup = (model: FakeModel.FakeModel["Type"], d: Live.LiveDirs, extra?: Partial<Session.SessionOptions>) =>
  Effect.gen(function*() {
    const tasks = yield* TaskManager.make({ root: Path.join(d.root, "tasks") })
    const stores = Layer.mergeAll(TranscriptStore.layer, SessionIndex.layer).pipe(
      Layer.provide(TranscriptLayout.layer(d.configDir)),
      Layer.provide(NodeContext.layer)
    )
    const context = yield* Layer.build(stores)
    const launch = Live.liveOptions(model, d, extra)
    const provide = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      effect.pipe(Effect.provide(context), Effect.provideService(TaskManager.TaskManager, tasks))
    return { tasks, launch, provide, index: Effect.provide(SessionIndex.SessionIndex, context) }
  })

describe("Worker e2e with the real CLI", () => {
  it.scopedLive("a fork's first request starts with the parent's messages; it records to its sidechain, never the parent's chain", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [reply("kumquat", "Noted: kumquat."), reply("fork-question", "The word was kumquat.")]
      })
      const d = yield* Live.dirs
      const { index, launch, provide, tasks } = yield* setup(model, d)
      const parent = yield* Session.start(launch)
      yield* Effect.flatMap(parent.send("Remember the word kumquat"), (t) => t.result)
      const parentId = yield* parent.sessionId
      const parentRequest = yield* model.awaitRequest(0, FakeModel.isConversation)
      const parentTranscript = Session.transcriptPath(d.configDir, d.cwd, parentId)
      const before = Fs.readFileSync(parentTranscript, "utf8")

      const workers = yield* provide(Worker.pool(parent, { launch }))
      const worker = yield* Worker.fork(workers, { label: "probe", prompt: "fork-question: which word?" })
      const result = yield* worker.result

      // The cache prefix: exactly the parent's last request, then the parent's reply, then the worker's prompt.
      const first = yield* model.awaitRequest(0, asking("fork-question"))
      const prefix = normalized(parentRequest)
      expect(prefix.length).toBeGreaterThan(0)
      expect(normalized(first).slice(0, prefix.length)).toEqual(prefix)
      expect(normalized(first).slice(prefix.length)).toEqual([
        { role: "assistant", content: [{ type: "text", text: "Noted: kumquat." }] },
        { role: "user", content: [{ type: "text", text: "fork-question: which word?" }] }
      ])

      // The result of the task.
      expect(result.text).toBe("The word was kumquat.")
      expect(result.isError).toBe(false)
      expect(result.subtype).toBe("success")
      expect(result.exit).toEqual({ code: 0, signal: null })
      expect(result.parentSessionId).toBe(parentId)
      expect(result.sessionId).toBe(worker.sessionId)
      expect(worker.sessionId).not.toBe(parentId)
      expect(worker.taskId).toMatch(/^a[0-9a-z]{8}$/)
      const record = yield* tasks.get(worker.taskId)
      expect(record.type).toBe("local_agent")
      expect(record.status).toBe("completed")
      expect(record.result).toMatchObject({ text: "The word was kumquat.", sessionId: worker.sessionId })
      const output = yield* tasks.readOutput(worker.taskId, 0)
      const lines = output.text.trim().split("\n").map((line): Block => JSON.parse(line))
      expect(lines.some((line) => line["type"] === "result")).toBe(true)
      expect(lines.find((line) => line["type"] === "system" && line["subtype"] === "init")?.["session_id"]).toBe(worker.sessionId)

      // The worker's own session file, and its sidechain under the parent with a meta pointing to it.
      const workerState = yield* Effect.flatMap(worker.session, (s) => s.state.get)
      expect(workerState.sessionId).toBe(worker.sessionId)
      expect(workerState.parentSessionId).toBe(parentId)
      expect(worker.transcriptPath).toBe(Session.transcriptPath(d.configDir, d.cwd, worker.sessionId))
      expect(Fs.readFileSync(worker.transcriptPath, "utf8")).toContain("fork-question: which word?")
      expect(worker.agentId).toMatch(/^probe-[0-9a-f-]{36}$/)
      expect(worker.sidechainPath).toBe(
        Path.join(Path.dirname(parentTranscript), parentId, "subagents", `agent-${worker.agentId}.jsonl`)
      )
      const sidechain = Fs.readFileSync(worker.sidechainPath, "utf8").trim().split("\n").map((line): Block => JSON.parse(line))
      expect(sidechain.map((entry) => entry["type"])).toEqual(["user", "assistant"])
      expect(sidechain.every((entry) => entry["isSidechain"] === true && entry["sessionId"] === parentId)).toBe(true)
      expect(sidechain.every((entry) => entry["agentId"] === worker.agentId)).toBe(true)
      expect(sidechain[1]?.["parentUuid"]).toBe(sidechain[0]?.["uuid"])
      expect(JSON.stringify(sidechain[1])).toContain("The word was kumquat.")
      const meta: Block = JSON.parse(Fs.readFileSync(worker.metaPath, "utf8"))
      expect(meta).toMatchObject({
        label: "probe",
        mode: "isolated",
        taskId: worker.taskId,
        parentSessionId: parentId,
        workerSessionId: worker.sessionId,
        workerTranscriptPath: worker.transcriptPath
      })

      // The parent's main chain gained nothing.
      const after = Fs.readFileSync(parentTranscript, "utf8")
      expect(after).toBe(before)
      expect(after).not.toContain("fork-question")
      expect(after).not.toContain(worker.sessionId)

      // The index hides the worker from list and continue unless asked.
      const sessionIndex = yield* index
      const listed = yield* sessionIndex.list({ cwd: d.cwd })
      expect(listed.map((s) => s.sessionId)).toEqual([parentId])
      const all = yield* sessionIndex.list({ cwd: d.cwd, workers: true })
      expect(all.map((s) => s.sessionId).sort()).toEqual([parentId, worker.sessionId].sort())

      // Costs: each process counts its own; the pool adds them up.
      const costs = yield* workers.costs
      const parentCounters = (yield* parent.state.get).counters
      expect(costs.parentUsd).toBe(parentCounters.costUsd)
      expect(costs.workers).toEqual([expect.objectContaining({ taskId: worker.taskId, status: "completed" })])
      expect(costs.workers[0]?.costUsd).toBe(workerState.counters.costUsd)
      expect(costs.workersUsd).toBeGreaterThan(0)
      expect(costs.workersUsd).toBe(result.costUsd)
      expect(costs.totalUsd).toBeCloseTo(costs.parentUsd + costs.workersUsd, 12)
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("interrupting the parent kills its 3 workers mid-stream: all 4 processes are gone, the tasks end killed", () =>
    Effect.gen(function*() {
      const slow = longText(80)
      const model = yield* FakeModel.make({
        replies: [
          reply("hello", "Hi."),
          reply("parent-slow", slow, "150 millis"),
          reply("slow-w1", slow, "150 millis"),
          reply("slow-w2", slow, "150 millis"),
          reply("slow-w3", slow, "150 millis")
        ]
      })
      const d = yield* Live.dirs
      const { launch, provide, tasks } = yield* setup(model, d)
      const ready = yield* Deferred.make<{ readonly parentPid: number; readonly workers: ReadonlyArray<Worker.Worker> }>()
      const parentFiber = yield* Effect.fork(Effect.scoped(Effect.gen(function*() {
        const parent = yield* Session.start(launch)
        yield* Effect.flatMap(parent.send("hello"), (t) => t.result)
        const pool = yield* provide(Worker.pool(parent, { launch }))
        const workers = yield* Effect.forEach([1, 2, 3], (i) => Worker.fork(pool, { label: `w${i}`, prompt: `slow-w${i}: go` }))
        yield* parent.send("parent-slow: go")
        yield* Deferred.succeed(ready, { parentPid: parent.pid, workers })
        return yield* Effect.never
      })))
      const { parentPid, workers } = yield* Deferred.await(ready)
      // All four streams are running.
      for (const marker of ["parent-slow", "slow-w1", "slow-w2", "slow-w3"]) {
        yield* model.awaitRequest(0, asking(marker))
      }
      const pids = [parentPid, ...(yield* Effect.forEach(workers, (w) => Effect.map(w.session, (s) => s.pid)))]
      expect(new Set(pids).size).toBe(4)
      expect(pids.every(Live.alive)).toBe(true)
      expect((yield* Effect.forEach(workers, (w) => tasks.get(w.taskId))).map((r) => r.status)).toEqual([
        "running",
        "running",
        "running"
      ])

      yield* Fiber.interrupt(parentFiber)

      expect(pids.filter(Live.alive)).toEqual([])
      const records = yield* Effect.forEach(workers, (w) => tasks.get(w.taskId))
      expect(records.map((r) => r.status)).toEqual(["killed", "killed", "killed"])
      const errors = yield* Effect.forEach(workers, (w) => Effect.flip(w.result))
      expect(errors.map((e) => e._tag)).toEqual(["WorkerKilled", "WorkerKilled", "WorkerKilled"])
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("killing a worker leaves its parent alone: the parent's turn finishes and the next one works", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          reply("hello", "Hi."),
          reply("slow-worker", longText(80), "150 millis"),
          reply("parent-busy", longText(20), "40 millis"),
          reply("parent-after", "Still here.")
        ]
      })
      const d = yield* Live.dirs
      const { launch, provide, tasks } = yield* setup(model, d)
      const parent = yield* Session.start(launch)
      yield* Effect.flatMap(parent.send("hello"), (t) => t.result)
      const pool = yield* provide(Worker.pool(parent, { launch }))
      const worker = yield* Worker.fork(pool, { label: "doomed", prompt: "slow-worker: go" })
      yield* model.awaitRequest(0, asking("slow-worker"))
      const workerPid = (yield* worker.session).pid
      const turn = yield* parent.send("parent-busy: go")
      yield* model.awaitRequest(0, asking("parent-busy"))

      const record = yield* worker.kill
      expect(record.status).toBe("killed")
      expect(Live.alive(workerPid)).toBe(false)
      expect(Live.alive(parent.pid)).toBe(true)

      const summary = yield* turn.result
      expect(summary.text).toBe(longText(20))
      expect(summary.interrupted).toBe(false)
      const next = yield* Effect.flatMap(parent.send("parent-after: there?"), (t) => t.result)
      expect(next.text).toBe("Still here.")
      expect((yield* tasks.get(worker.taskId)).status).toBe("killed")
      const error = yield* Effect.flip(worker.result)
      expect(error._tag).toBe("WorkerKilled")
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("a worker's setPermissionMode leaves the parent's mode alone, as the parent's next request shows", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [reply("hello", "Hi."), reply("slow-iso", longText(80), "150 millis"), reply("parent-two", "Two.")]
      })
      const d = yield* Live.dirs
      // `--bare` leaves the plan-mode instructions out, so this runs the full CLI.
      const { launch, provide } = yield* setup(model, d, { bare: false })
      const parent = yield* Session.start(launch)
      yield* Effect.flatMap(parent.send("hello"), (t) => t.result)
      expect((yield* parent.state.get).permissionMode).toBe("default")
      const pool = yield* provide(Worker.pool(parent, { launch }))
      const worker = yield* Worker.fork(pool, { label: "iso", prompt: "slow-iso: go" })
      yield* model.awaitRequest(0, asking("slow-iso"))
      const session = yield* worker.session

      yield* session.setPermissionMode("plan")
      expect((yield* session.state.get).permissionMode).toBe("plan")
      expect((yield* parent.state.get).permissionMode).toBe("default")
      expect((yield* parent.state.get).pendingPermissions).toEqual([])

      yield* Effect.flatMap(parent.send("parent-two: and now?"), (t) => t.result)
      const next = yield* model.awaitRequest(0, asking("parent-two"))
      expect(lastUserText(next)).not.toContain("Plan mode is active")
      expect((yield* parent.state.get).permissionMode).toBe("default")
      yield* worker.kill
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("the pool's limit queues forks: with one slot the second worker's CLI starts only after the first is done", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [reply("hello", "Hi."), reply("queue-one", longText(10), "50 millis"), reply("queue-two", "Second.")]
      })
      const d = yield* Live.dirs
      const { launch, provide } = yield* setup(model, d)
      const parent = yield* Session.start(launch)
      yield* Effect.flatMap(parent.send("hello"), (t) => t.result)
      const pool = yield* provide(Worker.pool(parent, { launch, concurrency: 1 }))
      const one = yield* Worker.fork(pool, { label: "one", prompt: "queue-one: go" })
      const two = yield* Worker.fork(pool, { label: "two", prompt: "queue-two: go" })
      yield* model.awaitRequest(0, asking("queue-one"))
      expect((yield* model.requests).some(asking("queue-two"))).toBe(false)

      const [first, second] = yield* Effect.all([one.result, two.result], { concurrency: "unbounded" })
      expect(first.text).toBe(longText(10))
      expect(second.text).toBe("Second.")
      const requests = yield* model.requests
      const lastOfOne = requests.findLastIndex(asking("queue-one"))
      const firstOfTwo = requests.findIndex(asking("queue-two"))
      expect(firstOfTwo).toBeGreaterThan(lastOfOne)
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("modes: an isolated worker asks its own policy, an interactive one the parent's handler", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          reply("hello", "Hi."),
          FakeModel.matching(FakeModel.toolUse("Bash", { command: "touch isolated.txt" }), asking("perm-isolated")),
          FakeModel.matching(FakeModel.toolUse("Bash", { command: "touch interactive.txt" }), asking("perm-interactive")),
          FakeModel.matching(FakeModel.toolUse("Bash", { command: "touch unguarded.txt" }), asking("perm-none"))
        ]
      })
      const d = yield* Live.dirs
      const { launch, provide } = yield* setup(model, d)
      const parentAsked: Array<Permissions.PermissionRequest> = []
      const ownAsked: Array<Permissions.PermissionRequest> = []
      const parent = yield* Session.start(launch)
      yield* Effect.flatMap(parent.send("hello"), (t) => t.result)
      const parentPolicy = Permissions.layer((request) => {
        parentAsked.push(request)
        return Effect.succeed(Permissions.allow())
      })
      // The parent's handler is in context where the pool is made, and where the isolated worker is forked.
      const pool = yield* provide(Worker.pool(parent, { launch })).pipe(Effect.provide(parentPolicy))
      const isolated = yield* Worker.fork(pool, {
        label: "isolated",
        prompt: "perm-isolated: make a file",
        permissions: Permissions.make((request) => {
          ownAsked.push(request)
          return Effect.succeed(Permissions.deny("the isolated worker's own policy says no"))
        })
      }).pipe(Effect.provide(parentPolicy))
      yield* isolated.result
      expect(ownAsked.map((r) => [r.toolName, r.sessionId])).toEqual([["Bash", isolated.sessionId]])
      expect(parentAsked).toEqual([])
      expect(Fs.existsSync(Path.join(d.cwd, "isolated.txt"))).toBe(false)
      // Without a policy of its own, an isolated worker gets none: the handler in the caller's context is not its.
      const unguarded = yield* Worker.fork(pool, { label: "unguarded", prompt: "perm-none: make a file" }).pipe(
        Effect.provide(parentPolicy)
      )
      yield* unguarded.result
      expect(parentAsked).toEqual([])
      expect(Fs.existsSync(Path.join(d.cwd, "unguarded.txt"))).toBe(false)

      const interactive = yield* Worker.fork(pool, { label: "interactive", mode: "interactive", prompt: "perm-interactive: make a file" })
      yield* interactive.result
      expect(parentAsked.map((r) => [r.toolName, r.sessionId])).toEqual([["Bash", interactive.sessionId]])
      expect(Fs.existsSync(Path.join(d.cwd, "interactive.txt"))).toBe(true)
      expect(ownAsked).toHaveLength(1)
      expect((yield* parent.state.get).pendingPermissions).toEqual([])
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("an interactive worker shares the parent's abort: its interrupt interrupts the parent's turn too", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [reply("hello", "Hi."), reply("slow-shared", longText(80), "150 millis"), reply("parent-slow", longText(80), "150 millis")]
      })
      const d = yield* Live.dirs
      const { launch, provide } = yield* setup(model, d)
      const parent = yield* Session.start(launch)
      yield* Effect.flatMap(parent.send("hello"), (t) => t.result)
      const pool = yield* provide(Worker.pool(parent, { launch }))
      const worker = yield* Worker.fork(pool, { label: "shared", mode: "interactive", prompt: "slow-shared: go" })
      const turn = yield* parent.send("parent-slow: go")
      yield* model.awaitRequest(0, asking("slow-shared"))
      yield* model.awaitRequest(0, asking("parent-slow"))

      yield* worker.interrupt
      const [workerResult, parentSummary] = yield* Effect.all([worker.result, turn.result], { concurrency: "unbounded" })
      expect(workerResult.interrupted).toBe(true)
      expect(parentSummary.interrupted).toBe(true)
      expect(parentSummary.text).toBeUndefined()
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("custom: its own agent id, initial messages, tools and model", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [reply("hello", "Hi."), reply("custom-task", "Custom done.")] })
      const d = yield* Live.dirs
      const { launch, provide } = yield* setup(model, d)
      const parent = yield* Session.start(launch)
      yield* Effect.flatMap(parent.send("hello"), (t) => t.result)
      const parentId = yield* parent.sessionId
      const pool = yield* provide(Worker.pool(parent, { launch }))
      const worker = yield* Worker.fork(pool, {
        label: "researcher",
        mode: "custom",
        agentId: "researcher-7",
        initialMessages: ["Context: the sky here is green."],
        tools: ["Read"],
        model: "claude-sonnet-4-5",
        prompt: "custom-task: what colour is the sky?"
      })
      const result = yield* worker.result
      expect(result.text).toBe("Custom done.")
      expect(worker.agentId).toBe("researcher-7")
      expect(Path.basename(worker.sidechainPath)).toBe("agent-researcher-7.jsonl")
      expect(Fs.existsSync(worker.sidechainPath)).toBe(true)
      const request = yield* model.awaitRequest(0, asking("custom-task"))
      expect(body(request).model).toBe("claude-sonnet-4-5")
      expect((body(request).tools ?? []).map((tool) => tool.name)).toEqual(["Read"])
      const last = normalized(request).at(-1)
      expect(last?.content.map((b) => b["text"])).toEqual(["Context: the sky here is green.", "custom-task: what colour is the sky?"])
      const meta: Block = JSON.parse(Fs.readFileSync(worker.metaPath, "utf8"))
      expect(meta).toMatchObject({ mode: "custom", parentSessionId: parentId })
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("a worker past its timeout fails with WorkerTimeout, its process stopped", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [reply("hello", "Hi."), reply("slow-timeout", longText(80), "150 millis")] })
      const d = yield* Live.dirs
      const { launch, provide, tasks } = yield* setup(model, d)
      const parent = yield* Session.start(launch)
      yield* Effect.flatMap(parent.send("hello"), (t) => t.result)
      const pool = yield* provide(Worker.pool(parent, { launch }))
      const worker = yield* Worker.fork(pool, { label: "late", prompt: "slow-timeout: go", timeout: "2 seconds" })
      const pid = (yield* worker.session).pid
      const error = yield* Effect.flip(worker.result)
      expect(error._tag).toBe("WorkerTimeout")
      const record = yield* tasks.get(worker.taskId)
      expect(record.status).toBe("failed")
      expect(record.errorTag).toBe("WorkerTimeout")
      expect(Live.alive(pid)).toBe(false)
      expect(Live.alive(parent.pid)).toBe(true)
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("the pool's interrupt is the parent's abort: its workers are killed and its turn interrupted, the session lives on", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          reply("hello", "Hi."),
          reply("slow-a", longText(80), "150 millis"),
          reply("slow-b", longText(80), "150 millis"),
          reply("parent-slow", longText(80), "150 millis"),
          reply("parent-after", "Still here.")
        ]
      })
      const d = yield* Live.dirs
      const { launch, provide, tasks } = yield* setup(model, d)
      const parent = yield* Session.start(launch)
      yield* Effect.flatMap(parent.send("hello"), (t) => t.result)
      const pool = yield* provide(Worker.pool(parent, { launch }))
      const workers = yield* Effect.forEach(["a", "b"], (x) => Worker.fork(pool, { label: x, prompt: `slow-${x}: go` }))
      const turn = yield* parent.send("parent-slow: go")
      for (const marker of ["slow-a", "slow-b", "parent-slow"]) yield* model.awaitRequest(0, asking(marker))
      const pids = yield* Effect.forEach(workers, (w) => Effect.map(w.session, (s) => s.pid))

      yield* pool.interrupt
      expect((yield* turn.result).interrupted).toBe(true)
      expect(pids.filter(Live.alive)).toEqual([])
      expect((yield* Effect.forEach(workers, (w) => tasks.get(w.taskId))).map((r) => r.status)).toEqual(["killed", "killed"])
      const next = yield* Effect.flatMap(parent.send("parent-after: there?"), (t) => t.result)
      expect(next.text).toBe("Still here.")
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("a worker forked in a narrower scope dies when that scope closes; the parent and the pool go on", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [reply("hello", "Hi."), reply("slow-inner", longText(80), "150 millis"), reply("after-inner", "Next one.")]
      })
      const d = yield* Live.dirs
      const { launch, provide, tasks } = yield* setup(model, d)
      const parent = yield* Session.start(launch)
      yield* Effect.flatMap(parent.send("hello"), (t) => t.result)
      const pool = yield* provide(Worker.pool(parent, { launch }))
      const { offset, pid, taskId } = yield* Effect.scoped(Effect.gen(function*() {
        const worker = yield* Worker.fork(pool, { label: "inner", prompt: "slow-inner: go" })
        yield* model.awaitRequest(0, asking("slow-inner"))
        // The output file is readable while the worker runs: its init is there before its reply.
        const early = yield* tasks.readOutput(worker.taskId, 0).pipe(
          Effect.filterOrFail((chunk) => chunk.text.includes(`"subtype":"init"`)),
          Effect.retry(Schedule.spaced("50 millis"))
        )
        expect(early.text).toContain(worker.sessionId)
        expect(early.text).not.toContain(`"type":"result"`)
        return { pid: (yield* worker.session).pid, taskId: worker.taskId, offset: early.nextOffset }
      }))
      const rest = yield* tasks.readOutput(taskId, offset)
      expect(rest.text).not.toContain(`"subtype":"init"`)
      expect(rest.nextOffset).toBeGreaterThanOrEqual(offset)
      expect((yield* tasks.get(taskId)).status).toBe("killed")
      expect(Live.alive(pid)).toBe(false)
      expect(Live.alive(parent.pid)).toBe(true)
      const next = yield* Worker.fork(pool, { label: "next", prompt: "after-inner: go" })
      expect((yield* next.result).text).toBe("Next one.")
    }).pipe(Effect.provide(Live.layer)))
})
