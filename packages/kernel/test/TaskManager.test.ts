import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import {
  Chunk,
  Data,
  Deferred,
  Duration,
  Effect,
  Either,
  Exit,
  FastCheck,
  Fiber,
  Queue,
  Ref,
  Schema,
  TestClock
} from "effect"
import * as Task from "../src/Task.js"
import * as TaskManager from "../src/TaskManager.js"
import { completePrefixLength } from "../src/internal/utf8.js"

const provide = <A, E>(effect: Effect.Effect<A, E, FileSystem.FileSystem | Path.Path>) =>
  Effect.provide(effect, NodeContext.layer)

const tempRoot = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "skein-tasks-" }))

/** One manager's lifetime: closing its scope is a clean shutdown of the "process". */
const withManager = <A, E, R>(
  options: TaskManager.TaskManagerOptions,
  f: (manager: TaskManager.TaskManager["Type"]) => Effect.Effect<A, E, R>
) => Effect.scoped(Effect.flatMap(TaskManager.make(options), f))

const drain = <A>(queue: Queue.Dequeue<A>) => Effect.map(Queue.takeAll(queue), Chunk.toReadonlyArray)

const notices = (events: ReadonlyArray<Task.TaskEvent>) =>
  events.filter((event): event is Task.TaskNotification => event.subtype === "task_notification")

const readRecord = (file: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const decoded = Task.decodeRecordJson(yield* fs.readFileString(file))
    if (Either.isLeft(decoded)) return yield* Effect.die(decoded.left)
    return decoded.right
  })

class Boom extends Data.TaggedError("Boom")<{ readonly message: string }> {}

// ---------------------------------------------------------------------------
// Ids
// ---------------------------------------------------------------------------

describe("Task ids", () => {
  it("carry their type's prefix and 8 characters of [0-9a-z]", () => {
    const expected = {
      local_bash: "b",
      local_agent: "a",
      remote_agent: "r",
      in_process_teammate: "t",
      local_workflow: "w",
      monitor_mcp: "m",
      dream: "d"
    } as const
    for (const type of Task.TaskType.literals) {
      const id = Task.makeId(type)
      expect(id).toMatch(new RegExp(`^${expected[type]}[0-9a-z]{8}$`))
      expect(Task.typeOf(id)).toBe(type)
      expect(Either.isRight(Task.parseId(id, type))).toBe(true)
    }
  })

  it("are unique and uniform over many draws", () => {
    const ids = new Set<string>()
    const counts = new Map<string, number>()
    const draws = 20_000
    for (let i = 0; i < draws; i++) {
      const id = Task.makeId("local_bash")
      ids.add(id)
      for (const char of id.slice(1)) counts.set(char, (counts.get(char) ?? 0) + 1)
    }
    expect(ids.size).toBe(draws)
    expect(counts.size).toBe(36)
    // Plain `byte % 36` would give 0-3 a 14% excess; rejection sampling leaves noise only (~1.5% sd).
    const mean = (draws * 8) / 36
    for (const count of counts.values()) expect(Math.abs(count - mean) / mean).toBeLessThan(0.08)
  })

  it("are validated by the schema and the parser", () => {
    const decode = Schema.decodeUnknownEither(Task.TaskId)
    expect(Either.isRight(decode("b1a2b3c4d"))).toBe(true)
    for (const bad of ["x1a2b3c4d", "b1a2b3c4", "b1a2b3c4d5", "bABCDEFGH", "b1a2b3c4-", "", "../../etc"]) {
      expect(Either.isLeft(decode(bad))).toBe(true)
      expect(Either.isLeft(Task.parseId(bad))).toBe(true)
    }
    const wrongType = Task.parseId("b1a2b3c4d", "dream")
    expect(Either.isLeft(wrongType) && wrongType.left._tag).toBe("InvalidTaskId")
  })
})

// ---------------------------------------------------------------------------
// The state machine
// ---------------------------------------------------------------------------

type Op = "start" | "complete" | "fail" | "kill" | "interrupt" | "update" | "restart"
const ops: ReadonlyArray<Op> = ["start", "complete", "fail", "kill", "interrupt", "update", "restart"]
const target: { readonly [K in Exclude<Op, "update" | "restart">]: Task.TaskStatus } = {
  start: "running",
  complete: "completed",
  fail: "failed",
  kill: "killed",
  interrupt: "interrupted"
}

/** The rules the manager must follow, stated independently of it. */
const model = (status: Task.TaskStatus, op: Op): { readonly next: Task.TaskStatus; readonly legal: boolean } => {
  const terminal = ["completed", "failed", "killed", "interrupted"].includes(status)
  if (op === "restart") return { next: terminal ? status : "interrupted", legal: true }
  if (terminal) return { next: status, legal: false }
  if (op === "update") return { next: status, legal: true }
  const to = target[op]
  if (to === status) return { next: status, legal: true }
  const legal = status === "pending" ? to !== "completed" : status === "running"
  return { next: legal ? to : status, legal }
}

const opArbitrary = FastCheck.record({
  task: FastCheck.integer({ min: 0, max: 1 }),
  op: FastCheck.constantFrom(...ops)
})

describe("Task.transition", () => {
  it("only moves forward, and never out of a terminal state", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.array(FastCheck.constantFrom(...Task.TaskStatus.literals), { maxLength: 30 }), (path) => {
        let status: Task.TaskStatus = "pending"
        const seen: Array<Task.TaskStatus> = [status]
        for (const to of path) {
          const step = Task.transition("b00000000", status, to)
          if (Either.isRight(step)) {
            expect(Task.isTerminal(status)).toBe(false)
            status = step.right
            seen.push(status)
          } else {
            expect(step.left).toMatchObject({ _tag: "IllegalTransition", id: "b00000000", from: status, to })
          }
          expect(Task.reachable.has(status)).toBe(true)
        }
        // Once terminal, the status is the last one seen.
        const firstTerminal = seen.findIndex(Task.isTerminal)
        if (firstTerminal >= 0) expect(seen.length).toBe(firstTerminal + 1)
      }),
      { numRuns: 500 }
    )
  })

  it("reaches every state from pending", () => {
    expect([...Task.reachable].sort()).toEqual([...Task.TaskStatus.literals].sort())
  })
})

describe("TaskManager state machine (property over tracked tasks and restarts)", () => {
  it.effect.prop(
    "keeps every invariant under random operations",
    [FastCheck.array(opArbitrary, { minLength: 1, maxLength: 14 })],
    ([sequence]) =>
      provide(Effect.scoped(Effect.gen(function*() {
        const root = yield* tempRoot
        const ids = ["b0000000a", "a0000000b"] as const
        const types = ["local_bash", "local_agent"] as const
        const expected: Array<Task.TaskStatus> = ["pending", "pending"]
        const history: Array<Array<Task.TaskStatus>> = [["pending"], ["pending"]]
        let generation = 0

        const run = (manager: TaskManager.TaskManager["Type"], from: number): Effect.Effect<number, never> =>
          Effect.gen(function*() {
            for (let i = from; i < sequence.length; i++) {
              const { task, op } = sequence[i]!
              const id = ids[task]
              if (op === "restart") return i
              const before = expected[task]!
              const { next, legal } = model(before, op)
              const result = yield* Effect.either(
                op === "update"
                  ? manager.update(id, { description: `step ${i}` })
                  : op === "kill"
                  ? manager.kill(id)
                  : manager.update(id, { status: target[op] })
              )
              if (legal) {
                expect(Either.isRight(result)).toBe(true)
              } else {
                expect(Either.isLeft(result) && result.left).toMatchObject({
                  _tag: "IllegalTransition",
                  id,
                  from: before,
                  to: op === "update" ? before : target[op]
                })
              }
              expected[task] = next
              history[task]!.push(next)
              for (const [k, taskId] of ids.entries()) {
                const record = yield* Effect.orDie(manager.get(taskId))
                expect(record.status).toBe(expected[k])
                expect(Task.reachable.has(record.status)).toBe(true)
              }
            }
            return sequence.length
          }).pipe(Effect.orDie)

        let position = 0
        // The first generation creates the tasks; every later one loads them from disk.
        while (position <= sequence.length) {
          const start = position
          position = yield* withManager({ root }, (manager) =>
            Effect.gen(function*() {
              if (generation === 0) {
                for (const [k, id] of ids.entries()) {
                  yield* Effect.orDie(manager.track(id, types[k]!, `task ${k}`, { status: "pending" }))
                }
              } else {
                for (const [k, id] of ids.entries()) {
                  const record = yield* Effect.orDie(manager.get(id))
                  expect(record.status).toBe(expected[k])
                }
              }
              return yield* run(manager, start)
            })).pipe(Effect.orDie)
          generation++
          if (position >= sequence.length) break
          // A restart: whatever was unfinished is now interrupted.
          for (const k of [0, 1]) {
            const { next } = model(expected[k]!, "restart")
            if (next !== expected[k]) history[k]!.push(next)
            expected[k] = next
          }
          position++
        }
        // Terminal states never changed: nothing follows the first terminal state in a history.
        for (const h of history) {
          const first = h.findIndex(Task.isTerminal)
          if (first >= 0) expect(h.slice(first).every((s) => s === h[first])).toBe(true)
        }
      }))),
    { fastCheck: { numRuns: 40 } }
  )
})

// ---------------------------------------------------------------------------
// Spawned tasks
// ---------------------------------------------------------------------------

describe("TaskManager spawned tasks", () => {
  it.effect("completes with its result kept as JSON, and publishes CLI-shaped events", () =>
    provide(Effect.scoped(Effect.gen(function*() {
      const root = yield* tempRoot
      yield* withManager({ root }, (manager) =>
        Effect.gen(function*() {
          const events = yield* manager.subscribe
          const gate = yield* Deferred.make<void>()
          const task = yield* manager.spawn("local_workflow", { description: "sum", toolUseId: "toolu_1" }, (ctx) =>
            Effect.gen(function*() {
              yield* Deferred.await(gate)
              yield* ctx.progress({ summary: "halfway", toolUses: 1 })
              return { total: 42, parts: [40, 2] }
            }))
          expect(task.status).toBe("pending")
          expect(task.id).toMatch(/^w[0-9a-z]{8}$/)
          yield* Deferred.succeed(gate, undefined)
          const done = yield* manager.await(task.id)
          expect(done.status).toBe("completed")
          expect(done.result).toEqual({ total: 42, parts: [40, 2] })
          expect(done.notified).toBe(true)
          const onDisk = yield* readRecord(done.outputFile.replace(/\.output$/, ".json"))
          expect(onDisk).toEqual(done)

          const seen = yield* drain(events)
          expect(seen.map((e) => e.subtype)).toEqual([
            "task_started",
            "task_updated",
            "task_progress",
            "task_updated",
            "task_notification"
          ])
          expect(seen[0]).toMatchObject({ type: "system", task_id: task.id, task_type: "local_workflow", tool_use_id: "toolu_1" })
          expect(seen[1]).toMatchObject({ patch: { status: "running" } })
          expect(seen[2]).toMatchObject({ summary: "halfway", usage: { tool_uses: 1 } })
          expect(seen[3]).toMatchObject({ patch: { status: "completed" } })
          expect(seen[4]).toMatchObject({
            task_id: task.id,
            status: "completed",
            output_file: done.outputFile,
            summary: `Task "sum" completed`
          })
        }))
    }))))

  it.effect("kill interrupts the fiber, runs its finalizer and ends killed", () =>
    provide(Effect.scoped(Effect.gen(function*() {
      const root = yield* tempRoot
      yield* withManager({ root }, (manager) =>
        Effect.gen(function*() {
          const events = yield* manager.subscribe
          const rolledBack = yield* Ref.make(false)
          const entered = yield* Deferred.make<void>()
          const task = yield* manager.spawn("dream", { description: "consolidate" }, () =>
            Deferred.succeed(entered, undefined).pipe(
              Effect.zipRight(Effect.never),
              Effect.ensuring(Ref.set(rolledBack, true))
            ))
          yield* Deferred.await(entered)
          expect((yield* manager.get(task.id)).status).toBe("running")
          const killed = yield* manager.kill(task.id)
          expect(killed.status).toBe("killed")
          expect(yield* Ref.get(rolledBack)).toBe(true)
          const again = yield* Effect.flip(manager.kill(task.id))
          expect(again).toMatchObject({ _tag: "IllegalTransition", from: "killed", to: "killed" })
          expect(notices(yield* drain(events))).toMatchObject([{ task_id: task.id, status: "stopped" }])
        }))
    }))))

  it.effect("kill before the fiber's first step still ends killed", () =>
    provide(Effect.scoped(Effect.gen(function*() {
      const root = yield* tempRoot
      yield* withManager({ root }, (manager) =>
        Effect.gen(function*() {
          const ran = yield* Ref.make(false)
          const task = yield* manager.spawn("local_bash", { description: "never starts" }, () => Ref.set(ran, true))
          const killed = yield* manager.kill(task.id)
          expect(killed.status).toBe("killed")
          expect((yield* manager.await(task.id)).status).toBe("killed")
          expect(yield* Ref.get(ran)).toBe(false)
        }))
    }))))

  it.effect("a failure keeps the cause, pretty-printed, and its tag", () =>
    provide(Effect.scoped(Effect.gen(function*() {
      const root = yield* tempRoot
      yield* withManager({ root }, (manager) =>
        Effect.gen(function*() {
          const events = yield* manager.subscribe
          const task = yield* manager.spawn("local_agent", { description: "doomed" }, () =>
            Effect.fail(new Boom({ message: "disk on fire" })))
          const done = yield* manager.await(task.id)
          expect(done.status).toBe("failed")
          expect(done.errorTag).toBe("Boom")
          expect(done.error).toContain("Boom")
          expect(done.error).toContain("disk on fire")
          const onDisk = yield* readRecord(done.outputFile.replace(/\.output$/, ".json"))
          expect(onDisk.error).toBe(done.error)
          const [notice] = notices(yield* drain(events))
          expect(notice).toMatchObject({ status: "failed" })
          expect(notice!.summary).toContain(`Task "doomed" failed`)
        }))
    }))))

  it.effect("a missed heartbeat fails the task with HeartbeatTimeout (TestClock)", () =>
    provide(Effect.scoped(Effect.gen(function*() {
      const root = yield* tempRoot
      yield* withManager({ root, heartbeatTimeout: "10 seconds" }, (manager) =>
        Effect.gen(function*() {
          const rolledBack = yield* Ref.make(false)
          const entered = yield* Deferred.make<void>()
          const task = yield* manager.spawn("monitor_mcp", { description: "watch" }, (ctx) =>
            Effect.gen(function*() {
              yield* Deferred.succeed(entered, undefined)
              for (let beat = 0; beat < 3; beat++) {
                yield* Effect.sleep("5 seconds")
                yield* ctx.heartbeat
              }
              return yield* Effect.never
            }).pipe(Effect.ensuring(Ref.set(rolledBack, true))))
          yield* Deferred.await(entered)
          // Beats at 5, 10 and 15 s push the deadline to 25 s.
          for (let second = 0; second < 24; second++) yield* TestClock.adjust("1 second")
          expect((yield* manager.get(task.id)).status).toBe("running")
          yield* TestClock.adjust("1 second")
          const done = yield* manager.await(task.id)
          expect(done.status).toBe("failed")
          expect(done.errorTag).toBe("HeartbeatTimeout")
          expect(yield* Ref.get(rolledBack)).toBe(true)
        }))
    }))))

  it.effect("a task with Duration.infinity has no heartbeat deadline", () =>
    provide(Effect.scoped(Effect.gen(function*() {
      const root = yield* tempRoot
      yield* withManager({ root, heartbeatTimeout: "1 second" }, (manager) =>
        Effect.gen(function*() {
          const entered = yield* Deferred.make<void>()
          const task = yield* manager.spawn(
            "local_bash",
            { description: "quiet", heartbeatTimeout: Duration.infinity },
            () => Deferred.succeed(entered, undefined).pipe(Effect.zipRight(Effect.sleep("1 hour")), Effect.as("ok"))
          )
          yield* Deferred.await(entered)
          const waiting = yield* Effect.fork(manager.await(task.id))
          yield* TestClock.adjust("59 minutes")
          expect((yield* manager.get(task.id)).status).toBe("running")
          yield* TestClock.adjust("1 minute")
          expect((yield* Fiber.join(waiting)).status).toBe("completed")
        }))
    }))))
})

// ---------------------------------------------------------------------------
// Output and files
// ---------------------------------------------------------------------------

describe("TaskManager output and files", () => {
  it.effect("output is read incrementally by byte offset, never splitting a character", () =>
    provide(Effect.scoped(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const root = yield* tempRoot
      yield* withManager({ root }, (manager) =>
        Effect.gen(function*() {
          const step = yield* Deferred.make<void>()
          const task = yield* manager.spawn("local_bash", { description: "echo" }, (ctx) =>
            Effect.gen(function*() {
              yield* ctx.append("hello ")
              yield* ctx.append("wörld 🧶\n")
              yield* Deferred.await(step)
              yield* ctx.append("more")
            }))
          // Appends land before the task waits; poll until they do.
          let first = yield* manager.readOutput(task.id, 0)
          while (first.nextOffset < 18) {
            yield* Effect.yieldNow()
            first = yield* manager.readOutput(task.id, 0)
          }
          expect(first).toEqual({ text: "hello wörld 🧶\n", nextOffset: 18 })
          expect(yield* manager.readOutput(task.id, first.nextOffset)).toEqual({ text: "", nextOffset: 18 })
          yield* Deferred.succeed(step, undefined)
          yield* manager.await(task.id)
          expect(yield* manager.readOutput(task.id, first.nextOffset)).toEqual({ text: "more", nextOffset: 22 })

          // A writer caught mid-character: the partial bytes wait for the rest.
          const mirror = yield* manager.track("b1a2b3c4d", "local_bash", "mirror")
          const emoji = new TextEncoder().encode("🧶")
          yield* fs.writeFile(mirror.outputFile, emoji.subarray(0, 2), { flag: "a" })
          expect(yield* manager.readOutput(mirror.id, 0)).toEqual({ text: "", nextOffset: 0 })
          yield* fs.writeFile(mirror.outputFile, emoji.subarray(2), { flag: "a" })
          expect(yield* manager.readOutput(mirror.id, 0)).toEqual({ text: "🧶", nextOffset: 4 })
          yield* manager.append(mirror.id, "ok")
          expect(yield* manager.readOutput(mirror.id, 4)).toEqual({ text: "ok", nextOffset: 6 })
        }))
    }))))

  it("completePrefixLength holds back only an incomplete trailing sequence", () => {
    const bytes = new TextEncoder().encode("aé日🧶")
    expect(completePrefixLength(bytes)).toBe(bytes.length)
    for (let cut = 0; cut <= bytes.length; cut++) {
      const keep = completePrefixLength(bytes.subarray(0, cut))
      expect(new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(0, keep))).toBe(
        "aé日🧶".slice(0, [0, 1, 1, 2, 2, 2, 3, 3, 3, 3, 5][cut])
      )
    }
  })

  it.effect("records and outputs are 0600, the tasks folder 0700", () =>
    provide(Effect.scoped(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const root = path.join(yield* tempRoot, "fresh")
      yield* withManager({ root }, (manager) =>
        Effect.gen(function*() {
          const task = yield* manager.spawn("local_bash", { description: "modes" }, (ctx) => ctx.append("x"))
          yield* manager.await(task.id)
          const dir = path.join(root, "tasks")
          expect((yield* fs.stat(dir)).mode & 0o777).toBe(0o700)
          expect((yield* fs.stat(root)).mode & 0o777).toBe(0o700)
          expect((yield* fs.stat(path.join(dir, `${task.id}.json`))).mode & 0o777).toBe(0o600)
          expect((yield* fs.stat(path.join(dir, `${task.id}.output`))).mode & 0o777).toBe(0o600)
          // No temp files are left behind by the atomic writes.
          expect((yield* fs.readDirectory(dir)).sort()).toEqual([`${task.id}.json`, `${task.id}.output`].sort())
        }))
    }))))
})

// ---------------------------------------------------------------------------
// Restarts
// ---------------------------------------------------------------------------

describe("TaskManager across restarts", () => {
  it.effect("notifications are exactly-once across a restart", () =>
    provide(Effect.scoped(Effect.gen(function*() {
      const root = yield* tempRoot
      // Process 1 finishes a task and "crashes" before its notice goes out:
      // with autoNotify off the record stays finished-but-unnotified, as a crash leaves it.
      const id = yield* withManager({ root, autoNotify: false }, (manager) =>
        Effect.gen(function*() {
          const events = yield* manager.subscribe
          const task = yield* manager.spawn("local_agent", { description: "answer" }, () => Effect.succeed(42))
          const done = yield* manager.await(task.id)
          expect(done).toMatchObject({ status: "completed", notified: false, result: 42 })
          expect(notices(yield* drain(events))).toEqual([])
          return task.id
        }))
      // Process 2 sends it once.
      yield* withManager({ root }, (manager) =>
        Effect.gen(function*() {
          expect(manager.recovery.unnotified).toEqual([id])
          const events = yield* manager.subscribe
          expect(yield* manager.notifyPending).toEqual([id])
          expect(yield* manager.notifyPending).toEqual([])
          expect(notices(yield* drain(events))).toMatchObject([{ task_id: id, status: "completed" }])
          expect((yield* manager.get(id)).notified).toBe(true)
        }))
      // Process 3 sends nothing.
      yield* withManager({ root }, (manager) =>
        Effect.gen(function*() {
          expect(manager.recovery.unnotified).toEqual([])
          const events = yield* manager.subscribe
          expect(yield* manager.notifyPending).toEqual([])
          expect(notices(yield* drain(events))).toEqual([])
        }))
    }))))

  it.effect("a task notified at once is never notified again after a restart", () =>
    provide(Effect.scoped(Effect.gen(function*() {
      const root = yield* tempRoot
      const id = yield* withManager({ root }, (manager) =>
        Effect.gen(function*() {
          const events = yield* manager.subscribe
          const task = yield* manager.track("r00000001", "remote_agent", "remote")
          yield* manager.update(task.id, { status: "completed", summary: "all done" })
          expect(notices(yield* drain(events))).toMatchObject([{ task_id: task.id, summary: "all done" }])
          return task.id
        }))
      yield* withManager({ root }, (manager) =>
        Effect.gen(function*() {
          expect((yield* manager.get(id)).notified).toBe(true)
          expect(yield* manager.notifyPending).toEqual([])
        }))
    }))))

  it.effect("records left running or pending become interrupted on the next start", () =>
    provide(Effect.scoped(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const root = yield* tempRoot
      const { tracked, waiting } = yield* withManager({ root }, (manager) =>
        Effect.gen(function*() {
          const tracked = yield* manager.track("b00000001", "local_bash", "sleep 100")
          const waiting = yield* manager.track("t00000002", "in_process_teammate", "teammate", { status: "pending" })
          return { tracked: tracked.id, waiting: waiting.id }
        }))
      // A process killed outright leaves a running record behind it, with nobody to settle it.
      const crashed = "w00000003"
      const record: Task.TaskRecord = {
        version: 1,
        id: Task.TaskId.make(crashed),
        type: "local_workflow",
        description: "cut off",
        status: "running",
        supervision: "spawned",
        createdAt: 1,
        updatedAt: 2,
        startedAt: 2,
        outputFile: path.join(root, "tasks", `${crashed}.output`),
        notified: false
      }
      const text = Either.getOrThrow(Task.encodeRecordJson(record))
      yield* fs.writeFileString(path.join(root, "tasks", `${crashed}.json`), text, { mode: 0o600 })

      yield* withManager({ root }, (manager) =>
        Effect.gen(function*() {
          expect([...manager.recovery.interrupted].sort()).toEqual([tracked, waiting, crashed].sort())
          for (const id of [tracked, waiting, crashed]) {
            expect((yield* manager.get(id)).status).toBe("interrupted")
            expect((yield* readRecord(path.join(root, "tasks", `${id}.json`))).status).toBe("interrupted")
          }
          const events = yield* manager.subscribe
          expect((yield* manager.notifyPending).length).toBe(3)
          const sent = notices(yield* drain(events))
          expect(sent.every((n) => n.status === "failed" && n.summary.includes("interrupted"))).toBe(true)
          const late = yield* Effect.flip(manager.update(crashed, { status: "running" }))
          expect(late).toMatchObject({ _tag: "IllegalTransition", from: "interrupted", to: "running" })
        }))
    }))))

  it.effect("a shutdown interrupts running spawned tasks, runs their finalizers and records them interrupted", () =>
    provide(Effect.scoped(Effect.gen(function*() {
      const root = yield* tempRoot
      const rolledBack = yield* Ref.make(false)
      const id = yield* withManager({ root }, (manager) =>
        Effect.gen(function*() {
          const entered = yield* Deferred.make<void>()
          const task = yield* manager.spawn("dream", { description: "long" }, () =>
            Deferred.succeed(entered, undefined).pipe(
              Effect.zipRight(Effect.never),
              Effect.ensuring(Ref.set(rolledBack, true))
            ))
          yield* Deferred.await(entered)
          return task.id
        }))
      expect(yield* Ref.get(rolledBack)).toBe(true)
      yield* withManager({ root }, (manager) =>
        Effect.gen(function*() {
          const record = yield* manager.get(id)
          expect(record).toMatchObject({ status: "interrupted", notified: false })
          // Already settled at shutdown, so the restart found nothing running.
          expect(manager.recovery.interrupted).toEqual([])
          expect(manager.recovery.unnotified).toEqual([id])
        }))
    }))))

  it.effect("a corrupt record is reported, not fatal", () =>
    provide(Effect.scoped(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const root = yield* tempRoot
      yield* fs.makeDirectory(path.join(root, "tasks"), { recursive: true })
      yield* fs.writeFileString(path.join(root, "tasks", "b00000009.json"), "{ not json")
      yield* fs.writeFileString(path.join(root, "tasks", "b00000008.json"), JSON.stringify({ version: 1, id: "b00000008" }))
      yield* withManager({ root }, (manager) =>
        Effect.gen(function*() {
          expect(manager.recovery.corrupt.map((c) => path.basename(c.file)).sort()).toEqual([
            "b00000008.json",
            "b00000009.json"
          ])
          expect(yield* manager.list).toEqual([])
          const task = yield* manager.spawn("local_bash", { description: "still works" }, () => Effect.void)
          expect((yield* manager.await(task.id)).status).toBe("completed")
          expect((yield* manager.get(task.id)).result).toBeUndefined()
        }))
    }))))
})

describe("TaskManager results and layer", () => {
  it.effect("a result schema encodes the value; a value that is not JSON is not kept", () =>
    provide(Effect.scoped(Effect.gen(function*() {
      const root = yield* tempRoot
      const program = Effect.gen(function*() {
        const manager = yield* TaskManager.TaskManager
        const dated = yield* manager.spawn(
          "local_workflow",
          { description: "date", result: Schema.Date },
          () => Effect.succeed(new Date(0))
        )
        expect((yield* manager.await(dated.id)).result).toBe("1970-01-01T00:00:00.000Z")
        const big = yield* manager.spawn("local_workflow", { description: "bigint" }, () => Effect.succeed(1n))
        expect(yield* manager.await(big.id)).toMatchObject({ status: "completed", result: undefined })
      })
      yield* Effect.provide(program, TaskManager.layer({ root }))
    }))))
})

describe("TaskManager tracked tasks", () => {
  it.effect("validates ids, refuses duplicates, and runs onKill", () =>
    provide(Effect.scoped(Effect.gen(function*() {
      const root = yield* tempRoot
      yield* withManager({ root }, (manager) =>
        Effect.gen(function*() {
          expect(yield* Effect.flip(manager.track("zzz", "local_bash", "bad"))).toMatchObject({ _tag: "InvalidTaskId" })
          expect(yield* Effect.flip(manager.track("a12345678", "local_bash", "wrong prefix"))).toMatchObject({
            _tag: "InvalidTaskId"
          })
          const stopped = yield* Ref.make(0)
          const task = yield* manager.track("b12345678", "local_bash", "ls", { onKill: Ref.update(stopped, (n) => n + 1) })
          expect(yield* Effect.flip(manager.track("b12345678", "local_bash", "ls"))).toMatchObject({
            _tag: "TaskAlreadyExists"
          })
          expect((yield* manager.kill(task.id)).status).toBe("killed")
          expect(yield* Ref.get(stopped)).toBe(1)
          expect(yield* Effect.flip(manager.get("b99999999"))).toMatchObject({ _tag: "TaskNotFound" })

          const spawned = yield* manager.spawn("local_bash", { description: "mine" }, () => Effect.never)
          expect(yield* Effect.flip(manager.update(spawned.id, { status: "completed" }))).toMatchObject({
            _tag: "TaskNotTracked"
          })
          expect((yield* manager.update(spawned.id, { description: "renamed" })).description).toBe("renamed")
          const exit = yield* Effect.exit(manager.kill(spawned.id))
          expect(Exit.isSuccess(exit) && exit.value.status).toBe("killed")
        }))
    }))))
})
