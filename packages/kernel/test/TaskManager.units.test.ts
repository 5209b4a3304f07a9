/**
 * The TaskManager's internal units, each alone: the pure rules (how an exit
 * or a patch becomes a record, what a notice says), the heartbeat watchdog
 * under TestClock, and the registry's write-then-commit and exactly-once
 * notices against a real tasks folder.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Chunk, Data, Deferred, Duration, Effect, Either, Exit, Fiber, FiberId, PubSub, Queue, Ref, Schema, TestClock } from "effect"
import * as Task from "../src/Task.js"
import * as TaskEvents from "../src/internal/taskEvents.js"
import * as Heartbeat from "../src/internal/taskHeartbeat.js"
import * as Recovery from "../src/internal/taskRecovery.js"
import * as Registry from "../src/internal/taskRegistry.js"
import * as Settle from "../src/internal/taskSettle.js"
import * as TaskStore from "../src/internal/taskStore.js"
import * as Tracked from "../src/internal/taskTracked.js"

class Boom extends Data.TaggedError("Boom")<{ readonly message: string }> {}

const record = (overrides: Partial<Task.TaskRecord> = {}): Task.TaskRecord => ({
  version: 1,
  id: Task.TaskId.make("b0000000a"),
  type: "local_bash",
  description: "work",
  status: "running",
  supervision: "spawned",
  createdAt: 100,
  updatedAt: 100,
  startedAt: 150,
  outputFile: "/nowhere/b0000000a.output",
  notified: false,
  ...overrides
})

/** A registry over a fresh tasks folder, and its event hub. */
const freshRegistry = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const root = yield* fs.makeTempDirectoryScoped({ prefix: "skein-task-units-" })
  const store = TaskStore.make(fs, path, root)
  yield* store.ensureDir
  const pubsub = yield* PubSub.unbounded<Task.TaskEvent>()
  const events = yield* PubSub.subscribe(pubsub)
  const registry = yield* Registry.make(store, pubsub, { autoNotify: true })
  return { fs, store, registry, events }
})

const drain = <A>(queue: Queue.Dequeue<A>) => Effect.map(Queue.takeAll(queue), Chunk.toReadonlyArray)

describe("taskSettle.settledRecord", () => {
  const context = { now: 500, killRequested: false, closing: false }

  it("a success keeps its value as JSON, or none if it is not JSON", () => {
    const kept = Settle.settledRecord(record(), Exit.succeed({ n: 1 }), context)
    expect(kept.next).toMatchObject({ status: "completed", result: { n: 1 }, endedAt: 500, updatedAt: 500, notified: false })
    expect(kept.lostResult).toBe(false)
    const lost = Settle.settledRecord(record(), Exit.succeed(1n), context)
    expect(lost.next.result).toBeUndefined()
    expect(lost.lostResult).toBe(true)
    expect(Settle.settledRecord(record(), Exit.succeed(undefined), context).lostResult).toBe(false)
    const dated = Settle.settledRecord(record(), Exit.succeed(new Date(0)), context, Schema.Date)
    expect(dated.next.result).toBe("1970-01-01T00:00:00.000Z")
  })

  it("a failure keeps the pretty cause and the first failure's tag", () => {
    const { next } = Settle.settledRecord(record(), Exit.fail(new Boom({ message: "disk on fire" })), context)
    expect(next.status).toBe("failed")
    expect(next.errorTag).toBe("Boom")
    expect(next.error).toContain("disk on fire")
    expect(Settle.settledRecord(record(), Exit.die("defect"), context).next.errorTag).toBeUndefined()
  })

  it("an interruption is killed unless the runtime shuts down unasked", () => {
    const cases: ReadonlyArray<[boolean, boolean, Task.TaskStatus]> = [
      [false, false, "killed"],
      [true, false, "killed"],
      [true, true, "killed"],
      [false, true, "interrupted"]
    ]
    for (const [killRequested, closing, status] of cases) {
      const { next } = Settle.settledRecord(record(), Exit.interrupt(FiberId.none), { now: 1, killRequested, closing })
      expect([killRequested, closing, next.status]).toEqual([killRequested, closing, status])
    }
  })

  it("an end the state machine forbids becomes failed: a pending task cannot complete", () => {
    const { next } = Settle.settledRecord(record({ status: "pending", startedAt: undefined }), Exit.succeed(1), context)
    expect(next.status).toBe("failed")
  })

  it("plainJson and failureTag", () => {
    expect(Settle.plainJson({ a: [1, "x"] })).toEqual({ a: [1, "x"] })
    expect(Settle.plainJson(() => 1)).toBeUndefined()
    const cyclic: { self?: unknown } = {}
    cyclic.self = cyclic
    expect(Settle.plainJson(cyclic)).toBeUndefined()
    expect(Settle.failureTag(Cause.fail({ _tag: "Tagged" }))).toBe("Tagged")
    expect(Settle.failureTag(Cause.fail("plain"))).toBeUndefined()
  })
})

describe("taskTracked.patched", () => {
  it("applies a step the state machine allows, stamping start and end", () =>
    Effect.gen(function*() {
      const pending = record({ status: "pending", supervision: "tracked", startedAt: undefined })
      const running = yield* Tracked.patched(pending, { status: "running" }, 200)
      expect(running).toMatchObject({ status: "running", startedAt: 200, updatedAt: 200, endedAt: undefined })
      const done = yield* Tracked.patched(running, { status: "completed", summary: "ok" }, 300)
      expect(done).toMatchObject({ status: "completed", startedAt: 200, endedAt: 300, summary: "ok" })
    }).pipe(Effect.runSync))

  it("refuses a terminal task, a forbidden step, and a status change of a spawned task", () =>
    Effect.gen(function*() {
      const killed = record({ status: "killed", supervision: "tracked" })
      expect(yield* Effect.flip(Tracked.patched(killed, { description: "late" }, 1))).toMatchObject({
        _tag: "IllegalTransition",
        from: "killed",
        to: "killed"
      })
      const pending = record({ status: "pending", supervision: "tracked" })
      expect(yield* Effect.flip(Tracked.patched(pending, { status: "completed" }, 1))).toMatchObject({
        _tag: "IllegalTransition",
        from: "pending",
        to: "completed"
      })
      const spawned = record()
      expect(yield* Effect.flip(Tracked.patched(spawned, { status: "completed" }, 1))).toMatchObject({ _tag: "TaskNotTracked" })
      expect((yield* Tracked.patched(spawned, { description: "renamed" }, 1)).description).toBe("renamed")
    }).pipe(Effect.runSync))
})

describe("taskEvents", () => {
  it("a notice's summary is the task's own, else how it ended", () => {
    expect(TaskEvents.summaryOf(record({ summary: "mine" }))).toBe("mine")
    expect(TaskEvents.summaryOf(record({ status: "completed" }))).toBe(`Task "work" completed`)
    expect(TaskEvents.summaryOf(record({ status: "failed", error: "first\nsecond" }))).toBe(`Task "work" failed: first`)
    expect(TaskEvents.summaryOf(record({ status: "killed" }))).toBe(`Task "work" was stopped`)
    expect(TaskEvents.summaryOf(record({ status: "interrupted" }))).toContain("interrupted")
    expect(TaskEvents.notification(record({ status: "killed" }))).toMatchObject({ status: "stopped", task_id: "b0000000a" })
  })

  it("progress counts its duration from the start, or from creation", () => {
    expect(TaskEvents.progress(record(), 400, { toolUses: 2 }).usage).toEqual({ total_tokens: 0, tool_uses: 2, duration_ms: 250 })
    expect(TaskEvents.progress(record({ startedAt: undefined }), 400).usage.duration_ms).toBe(300)
    expect(TaskEvents.progress(record(), 0).usage.duration_ms).toBe(0)
  })
})

describe("taskHeartbeat", () => {
  it.scoped("the watchdog fails once the last beat is older than the limit (TestClock)", () =>
    Effect.gen(function*() {
      const { registry } = yield* freshRegistry
      const entry = yield* Registry.add(registry, record())
      const watch = yield* Effect.fork(Heartbeat.watchdog(entry, 1000))
      yield* TestClock.adjust("600 millis")
      yield* Heartbeat.beat(entry)
      yield* TestClock.adjust("999 millis")
      expect(watch.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 millis")
      const exit = yield* Fiber.await(watch)
      expect(Exit.isFailure(exit) && Cause.failureOption(exit.cause)).toMatchObject({
        _tag: "Some",
        value: { _tag: "HeartbeatTimeout", timeoutMillis: 1000 }
      })
    }).pipe(Effect.provide(NodeContext.layer)))

  it("a task's own limit wins; an infinite one leaves the work unguarded", () => {
    expect(Heartbeat.limitOf(undefined, Duration.seconds(3))).toEqual(Duration.seconds(3))
    expect(Heartbeat.limitOf("1 second", Duration.seconds(3))).toEqual(Duration.seconds(1))
    expect(Heartbeat.limitOf(undefined, undefined)).toBeUndefined()
  })

  it.scoped("guard with an infinite limit runs the work alone", () =>
    Effect.gen(function*() {
      const { registry } = yield* freshRegistry
      const entry = yield* Registry.add(registry, record())
      const fiber = yield* Effect.fork(Heartbeat.guard(Effect.as(Effect.sleep("1 hour"), "done"), entry, Duration.infinity))
      yield* TestClock.adjust("1 hour")
      expect(yield* Fiber.join(fiber)).toBe("done")
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("taskRegistry", () => {
  it.scoped("a failed write changes nothing: the entry keeps its record", () =>
    Effect.gen(function*() {
      const { fs, registry, store } = yield* freshRegistry
      const entry = yield* Registry.add(registry, record())
      yield* fs.remove(store.dir, { recursive: true })
      const error = yield* Effect.flip(Registry.commit(registry, entry, record({ description: "new" }), "test write"))
      expect(error).toMatchObject({ _tag: "TaskStoreError", operation: "test write" })
      expect(entry.record.description).toBe("work")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a finished task is notified exactly once, and finish wakes its awaiters", () =>
    Effect.gen(function*() {
      const { events, fs, registry, store } = yield* freshRegistry
      const entry = yield* Registry.add(registry, record())
      expect(yield* Registry.notify(registry, entry)).toBe(false)
      entry.record = record({ status: "completed", endedAt: 5 })
      yield* Registry.finish(registry, entry)
      expect(yield* Registry.notify(registry, entry)).toBe(false)
      expect(yield* Registry.notifyPending(registry)).toEqual([])
      expect((yield* drain(events)).map((e) => e.subtype)).toEqual(["task_notification"])
      expect((yield* Deferred.await(entry.done)).notified).toBe(true)
      const onDisk = Task.decodeRecordJson(yield* fs.readFileString(store.recordPath(entry.record.id)))
      expect(Either.isRight(onDisk) && onDisk.right.notified).toBe(true)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("once the manager is closing, finish wakes awaiters but leaves the notice for the next start", () =>
    Effect.gen(function*() {
      const { events, registry } = yield* freshRegistry
      const entry = yield* Registry.add(registry, record())
      entry.record = record({ status: "failed", error: "x" })
      yield* Ref.set(registry.closing, true)
      yield* Registry.finish(registry, entry)
      expect((yield* Deferred.await(entry.done)).status).toBe("failed")
      expect(entry.record.notified).toBe(false)
      expect(yield* drain(events)).toEqual([])
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("taskRecovery.recover", () => {
  it.scoped("records left unfinished become interrupted on disk; finished ones are kept as they are", () =>
    Effect.gen(function*() {
      const { events, registry, store } = yield* freshRegistry
      yield* store.write(record({ id: Task.TaskId.make("b00000001"), status: "running" }))
      yield* store.write(record({ id: Task.TaskId.make("b00000002"), status: "pending", startedAt: undefined }))
      yield* store.write(record({ id: Task.TaskId.make("b00000003"), status: "completed", notified: true }))
      yield* store.write(record({ id: Task.TaskId.make("b00000004"), status: "failed", error: "x" }))
      const found = yield* Recovery.recover(registry)
      expect([...found.interrupted].sort()).toEqual(["b00000001", "b00000002"])
      expect([...found.unnotified].sort()).toEqual(["b00000001", "b00000002", "b00000004"])
      const reloaded = yield* store.load
      const statuses = Object.fromEntries(reloaded.records.map((r) => [r.id, r.status]))
      expect(statuses).toEqual({ b00000001: "interrupted", b00000002: "interrupted", b00000003: "completed", b00000004: "failed" })
      // Recovery publishes nothing: nobody can have subscribed while the manager was made.
      expect(yield* drain(events)).toEqual([])
      expect(Recovery.interruptedAt(record(), 9)).toMatchObject({ status: "interrupted", updatedAt: 9, endedAt: 9, notified: false })
    }).pipe(Effect.provide(NodeContext.layer)))
})
