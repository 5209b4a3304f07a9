/**
 * The Worker pool's teardown against CLIs that do not cooperate: the parent
 * is a FakeCli, the workers a stand-in that reads nothing, answers nothing
 * and ignores SIGTERM. Whatever the workers do, closing the pool and killing
 * a worker finish, and leave no worker process behind.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { ProcessHost, Task, TaskManager } from "@skein/kernel"
import { TranscriptLayout, TranscriptStore } from "@skein/store"
import { FakeCli } from "@skein/testkit"
import { Context, Duration, Effect, Exit, Fiber, Layer, Option, Schedule, Scope } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Elicitation } from "../src/Elicitation.js"
import { Hooks } from "../src/Hooks.js"
import * as Permissions from "../src/Permissions.js"
import * as Session from "../src/Session.js"
import * as Turn from "../src/Turn.js"
import * as ForkLaunch from "../src/internal/forkLaunch.js"
import * as WorkerRun from "../src/internal/workerRun.js"
import * as WorkerTeardown from "../src/internal/workerTeardown.js"
import * as Worker from "../src/Worker.js"
import { fake } from "./fake.js"
import * as Live from "./live.js"

const parentSessionId = "5e55a1d0-0000-4000-8000-0000000000aa"

/** Reads nothing, so answers nothing (not `interrupt` either), and survives SIGTERM. */
const ignoresEverything = "process.on('SIGTERM',()=>{});setInterval(()=>{},1000)"

const stopTimeouts = { stdinGrace: "200 millis", termGrace: "300 millis" } as const

/**
 * The failure condition: well past what the stop escalation needs, yet short
 * of the test's own timeout. Awaiting the fiber is interruptible, so the
 * timeout fires even while the close itself is stuck.
 */
const bound = Duration.seconds(15)

const finishesWithin = <A, E>(fiber: Fiber.Fiber<A, E>) =>
  Fiber.await(fiber).pipe(Effect.timeoutFail({ duration: bound, onTimeout: () => "the teardown did not finish" as const }))

/**
 * A parent that has a session id (its first turn ran), a transcript for the
 * workers to resume, a TaskManager and a TranscriptStore, and the launch of
 * the workers: the stand-in in place of the CLI.
 */
const setup = Effect.gen(function*() {
  const d = yield* Live.dirs
  const cwd = Fs.realpathSync(d.cwd)
  const parent = yield* Session.start(fake([...FakeCli.textTurn("Hi.", { sessionId: parentSessionId, cwd }), FakeCli.waitForEnd], { cwd, configDir: d.configDir }))
  yield* Effect.flatMap(parent.send("hello"), (turn) => turn.result)
  const transcript = Session.transcriptPath(d.configDir, cwd, parentSessionId)
  Fs.mkdirSync(Path.dirname(transcript), { recursive: true })
  Fs.writeFileSync(transcript, "")
  const tasks = yield* TaskManager.make({ root: Path.join(d.root, "tasks") })
  const store = yield* Layer.build(TranscriptStore.layer.pipe(
    Layer.provide(TranscriptLayout.layer(d.configDir)),
    Layer.provide(NodeContext.layer)
  ))
  const launch: Session.SessionOptions = {
    cwd,
    configDir: d.configDir,
    executable: process.execPath,
    executableArgs: ["-e", ignoresEverything, "--"],
    stopTimeouts
  }
  const provide = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    effect.pipe(Effect.provide(store), Effect.provideService(TaskManager.TaskManager, tasks))
  return { parent, tasks, launch, provide }
})

/** The worker's process runs and its turn has been sent: the prompt is in its sidechain. */
const running = (worker: Worker.Worker) =>
  Effect.gen(function*() {
    const session = yield* worker.session
    yield* Effect.sync(() => Fs.existsSync(worker.sidechainPath) && Fs.readFileSync(worker.sidechainPath, "utf8").length > 0).pipe(
      Effect.repeat({ schedule: Schedule.spaced("20 millis"), until: (written) => written })
    )
    // `send` is right behind the sidechain's first entry; let its write land.
    yield* Effect.sleep("300 millis")
    return session.pid
  })

/** Should a check fail, the test still leaves nothing running. */
const reapAll = (pids: ReadonlyArray<number>) =>
  Effect.sync(() => {
    for (const pid of pids) {
      if (ProcessHost.isAlive(pid)) process.kill(pid, "SIGKILL")
    }
  })

describe("Worker pool teardown", () => {
  it.scopedLive("failure 1: closing a pool whose workers' CLI ignores everything finishes, and no worker process is left", () =>
    Effect.gen(function*() {
      const { launch, parent, provide, tasks } = yield* setup
      const poolScope = yield* Scope.make()
      const pool = yield* provide(Worker.pool(parent, { launch })).pipe(Scope.extend(poolScope))
      const workers = yield* Effect.forEach(["one", "two"], (label) =>
        Worker.fork(pool, { label, prompt: `${label}: go` }).pipe(Scope.extend(poolScope)))
      const pids = yield* Effect.forEach(workers, running)
      yield* Effect.gen(function*() {
        expect(pids.every(ProcessHost.isAlive)).toBe(true)
        const close = yield* Effect.fork(Scope.close(poolScope, Exit.void))
        expect(Exit.isSuccess(yield* finishesWithin(close))).toBe(true)
        expect(pids.filter(ProcessHost.isAlive)).toEqual([])
        const records = yield* Effect.forEach(workers, (w) => tasks.await(w.taskId))
        expect(records.map((r) => r.status)).toEqual(["killed", "killed"])
        expect(ProcessHost.isAlive(parent.pid)).toBe(true)
      }).pipe(Effect.ensuring(reapAll(pids)))
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("failure 1: killing a worker whose CLI ignores everything finishes, its process gone, its task killed", () =>
    Effect.gen(function*() {
      const { launch, parent, provide } = yield* setup
      const pool = yield* provide(Worker.pool(parent, { launch }))
      const worker = yield* Worker.fork(pool, { label: "deaf", prompt: "deaf: go" })
      const pid = yield* running(worker)
      yield* Effect.gen(function*() {
        const kill = yield* Effect.fork(worker.kill)
        const exit = yield* finishesWithin(kill)
        expect(Exit.isSuccess(exit) && exit.value.status).toBe("killed")
        expect(ProcessHost.isAlive(pid)).toBe(false)
        expect((yield* Effect.flip(worker.result))._tag).toBe("WorkerKilled")
      }).pipe(Effect.ensuring(reapAll([pid])))
    }).pipe(Effect.provide(Live.layer)))
})

describe("workerTeardown.stop", () => {
  const record = (status: Task.TaskStatus): Task.TaskRecord => ({
    version: 1,
    id: Task.TaskId.make("a0000000c"),
    type: "local_agent",
    description: "stuck",
    status,
    supervision: "spawned",
    createdAt: 0,
    updatedAt: 0,
    outputFile: "/nowhere",
    notified: false
  })

  /** A process that ignores everything, spawned through the hold, with a stop escalation longer than the test. */
  const stuckProcess = Effect.gen(function*() {
    const host = yield* ProcessHost.ProcessHost
    const hold = yield* WorkerTeardown.makeHold
    const child = yield* WorkerTeardown.holding(host, hold).spawn({
      command: process.execPath,
      args: ["-e", ignoresEverything],
      stopTimeouts: { stdinGrace: "1 minute", termGrace: "1 minute" }
    })
    return { child, hold }
  })

  /** Run as a finalizer runs it: uninterruptible. */
  const stopInFinalizer = (options: WorkerTeardown.StopOptions) =>
    Effect.fork(Effect.uninterruptible(WorkerTeardown.stop(options)))

  it.scopedLive("a kill waiting on a task stuck in its finalizer ends once the bound passes: the process group is SIGKILLed", () =>
    Effect.gen(function*() {
      const { child, hold } = yield* stuckProcess
      yield* Effect.gen(function*() {
        // The task: its finalizer waits for the process, as a session's close waits for its CLI.
        const task = yield* Effect.fork(Effect.scoped(Effect.zipRight(Effect.addFinalizer(() => child.await), Effect.never)))
        const kill = Effect.as(Fiber.interrupt(task), record("killed"))
        const stop = yield* stopInFinalizer({ taskId: "a0000000c", kill, current: Effect.succeed(record("running")), hold, bound: Duration.millis(300) })
        const exit = yield* finishesWithin(stop)
        expect(Exit.isSuccess(exit) && exit.value.status).toBe("killed")
        expect((yield* child.await).signal).toBe("SIGKILL")
        expect(ProcessHost.isAlive(child.pid)).toBe(false)
      }).pipe(Effect.ensuring(reapAll([child.pid])))
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("a kill that cannot be interrupted at all still ends: the SIGKILL does not depend on interruption", () =>
    Effect.gen(function*() {
      const { child, hold } = yield* stuckProcess
      yield* Effect.gen(function*() {
        const kill = Effect.as(Effect.uninterruptible(child.await), record("killed"))
        const stop = yield* stopInFinalizer({ taskId: "a0000000c", kill, current: Effect.succeed(record("running")), hold, bound: Duration.millis(300) })
        const exit = yield* finishesWithin(stop)
        expect(Exit.isSuccess(exit) && exit.value.status).toBe("killed")
        expect(ProcessHost.isAlive(child.pid)).toBe(false)
      }).pipe(Effect.ensuring(reapAll([child.pid])))
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("a kill that finishes in time sends no signal, and a wait that outlives the SIGKILL returns the record as it is", () =>
    Effect.gen(function*() {
      const { child, hold } = yield* stuckProcess
      yield* Effect.gen(function*() {
        const quick = yield* WorkerTeardown.stop({
          taskId: "a0000000c",
          kill: Effect.succeed(record("killed")),
          current: Effect.succeed(record("running")),
          hold,
          bound: Duration.millis(300)
        })
        expect(quick.status).toBe("killed")
        expect(yield* child.isRunning).toBe(true)
        // A wait that nothing ends, not even the process's death: bounded all the same.
        const stop = yield* stopInFinalizer({
          taskId: "a0000000c",
          kill: Effect.never,
          current: Effect.succeed(record("running")),
          hold,
          bound: Duration.millis(300)
        })
        const exit = yield* finishesWithin(stop)
        expect(Exit.isSuccess(exit) && exit.value.status).toBe("running")
        expect(ProcessHost.isAlive(child.pid)).toBe(false)
      }).pipe(Effect.ensuring(reapAll([child.pid])))
    }).pipe(Effect.provide(Live.layer)))

  it("the bound is the session's interrupt allowance plus the stop escalation, plus slack", () => {
    expect(Duration.toMillis(WorkerTeardown.stopBound(undefined))).toBe(1000 + 2000 + 3000 + 1000)
    expect(Duration.toMillis(WorkerTeardown.stopBound({ stdinGrace: "200 millis", termGrace: "300 millis" }))).toBe(2500)
  })
})

describe("forkLaunch", () => {
  it("a custom worker's initial messages come before the prompt, as text blocks", () => {
    expect(ForkLaunch.content({ label: "x", prompt: "go" })).toBe("go")
    expect(ForkLaunch.content({ label: "x", mode: "custom", agentId: "a", initialMessages: [], prompt: "go" })).toBe("go")
    expect(ForkLaunch.content({
      label: "x",
      mode: "custom",
      agentId: "a",
      initialMessages: ["first", [{ type: "text", text: "second" }]],
      prompt: "go"
    })).toEqual([{ type: "text", text: "first" }, { type: "text", text: "second" }, { type: "text", text: "go" }])
  })

  it("a worker's services: the parent's handlers only when interactive, else its own policy or none", () =>
    Effect.gen(function*() {
      const host = yield* ProcessHost.ProcessHost
      const parentPolicy = Permissions.make(() => Effect.succeed(Permissions.allow()))
      const ownPolicy = Permissions.make(() => Effect.succeed(Permissions.deny("mine")))
      const hooks = { registrations: [] }
      const elicitation = { elicit: () => Effect.succeed({ action: "decline" as const }) }
      const shared: ForkLaunch.SharedHandlers = {
        permissions: Option.some(parentPolicy),
        hooks: Option.some(hooks),
        elicitation: Option.some(elicitation)
      }
      const interactive = ForkLaunch.services({ label: "i", mode: "interactive", prompt: "p" }, host, shared)
      expect(Context.getOption(interactive, Permissions.Permissions)).toEqual(Option.some(parentPolicy))
      expect(Context.getOption(interactive, Hooks)).toEqual(Option.some(hooks))
      expect(Context.getOption(interactive, Elicitation)).toEqual(Option.some(elicitation))
      const own = ForkLaunch.services({ label: "o", prompt: "p", permissions: ownPolicy }, host, shared)
      expect(Context.getOption(own, Permissions.Permissions)).toEqual(Option.some(ownPolicy))
      expect(Option.isNone(Context.getOption(own, Hooks))).toBe(true)
      const bare = ForkLaunch.services({ label: "b", prompt: "p" }, host, shared)
      expect(Option.isNone(Context.getOption(bare, Permissions.Permissions))).toBe(true)
      expect(Context.get(bare, ProcessHost.ProcessHost)).toBe(host)
    }).pipe(Effect.provide(Live.layer), Effect.runPromise))
})

describe("workerRun.resultOf", () => {
  const plan = (): ForkLaunch.ForkPlan => ({
    mode: "isolated",
    label: "probe",
    description: "probe",
    agentId: "probe-1",
    sessionId: "worker-session",
    parentSessionId: "parent-session",
    cwd: "/cwd",
    transcriptPath: "/t/worker-session.jsonl",
    sidechain: { agentId: "probe-1", transcript: "/t/parent-session/subagents/agent-probe-1.jsonl", meta: "/t/agent-probe-1.meta.json" },
    chain: { parentSessionId: "parent-session", agentId: "probe-1", cwd: "/cwd" },
    sessionOptions: { cwd: "/cwd" },
    content: "go",
    timeout: undefined
  })
  const summary: Turn.TurnSummary = {
    ...Turn.summarize([], { costBefore: 0, interrupted: true }),
    origin: "host",
    endReason: "interruptSettle",
    liveTasks: []
  }

  it("carries the plan's ids and files, the summary, and how the CLI exited (nulls if it had to be stopped)", () => {
    const exited = WorkerRun.resultOf(plan(), "a00000001", summary, Option.some({ code: 0, signal: null, stderrTail: "" }))
    expect(exited).toMatchObject({
      taskId: "a00000001",
      label: "probe",
      agentId: "probe-1",
      mode: "isolated",
      sessionId: "worker-session",
      parentSessionId: "parent-session",
      text: undefined,
      subtype: undefined,
      interrupted: true,
      isError: false,
      exit: { code: 0, signal: null },
      transcriptPath: "/t/worker-session.jsonl",
      sidechainPath: "/t/parent-session/subagents/agent-probe-1.jsonl"
    })
    expect(WorkerRun.resultOf(plan(), "a00000001", summary, Option.none()).exit).toEqual({ code: null, signal: null })
  })
})
