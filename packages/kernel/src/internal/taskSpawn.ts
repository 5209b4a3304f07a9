/**
 * Tasks the manager runs itself: each is a fiber in the manager's FiberMap,
 * so `kill` is interruption and the task's finalizers are its rollback.
 * Whatever ends the fiber (its work, a kill, the heartbeat watchdog, the
 * manager's shutdown), `settle` turns its exit into the terminal record.
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Clock from "effect/Clock"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as FiberMap from "effect/FiberMap"
import * as Task from "../Task.js"
import type { SpawnOptions, TaskContext } from "../TaskManager.js"
import { storeError, type TaskStoreError } from "./taskErrors.js"
import * as TaskEvents from "./taskEvents.js"
import * as Heartbeat from "./taskHeartbeat.js"
import * as Output from "./taskOutput.js"
import * as Registry from "./taskRegistry.js"
import { settle } from "./taskSettle.js"

export interface Spawner {
  readonly registry: Registry.Registry
  readonly fibers: FiberMap.FiberMap<string>
  readonly fs: FileSystem.FileSystem
  /** The manager's heartbeat deadline, for tasks that set none. */
  readonly heartbeat: Duration.Duration | undefined
}

/** An id neither registered nor on disk: a record there may belong to a task this process never loaded. */
const freshId = (spawner: Spawner, type: Task.TaskType) =>
  Effect.gen(function*() {
    for (;;) {
      const id = Task.makeId(type)
      if (spawner.registry.entries.has(id)) continue
      const taken = yield* spawner.fs.exists(spawner.registry.store.recordPath(id)).pipe(
        Effect.orElseSucceed(() => true)
      )
      if (!taken) return id
    }
  })

/** pending → running, recorded before the work's first step. */
const start = (registry: Registry.Registry, entry: Registry.Entry) =>
  entry.lock.withPermits(1)(
    Effect.gen(function*() {
      const record = entry.record
      const now = yield* Clock.currentTimeMillis
      const to = yield* Task.transition(record.id, record.status, "running")
      yield* Registry.commit(registry, entry, { ...record, status: to, updatedAt: now, startedAt: now }, "record the start")
      entry.lastBeat = now
      yield* registry.publish(TaskEvents.updated(record.id, { status: to }))
    })
  )

const contextOf = (registry: Registry.Registry, entry: Registry.Entry): TaskContext => ({
  id: entry.record.id,
  outputFile: entry.record.outputFile,
  append: (text) => Output.append(registry, entry, text),
  heartbeat: Heartbeat.beat(entry),
  progress: (progress) => Output.progress(registry, entry, progress)
})

export const spawn = <A, E, R, I = A>(
  spawner: Spawner,
  type: Task.TaskType,
  options: SpawnOptions<A, I>,
  task: (context: TaskContext) => Effect.Effect<A, E, R>
): Effect.Effect<Task.TaskRecord, TaskStoreError, R> =>
  Effect.gen(function*() {
    const { registry } = spawner
    const id = yield* freshId(spawner, type)
    const now = yield* Clock.currentTimeMillis
    const record: Task.TaskRecord = {
      version: 1,
      id,
      type,
      description: options.description,
      status: "pending",
      supervision: "spawned",
      createdAt: now,
      updatedAt: now,
      outputFile: registry.store.outputPath(id),
      toolUseId: options.toolUseId,
      parentTaskId: options.parentTaskId,
      notified: false
    }
    yield* registry.store.createOutput(record.outputFile).pipe(Effect.mapError(storeError("create the output file")))
    yield* registry.store.write(record).pipe(Effect.mapError(storeError("record the task")))
    const entry = yield* Registry.add(registry, record)
    yield* registry.publish(TaskEvents.started(record))

    const limit = Heartbeat.limitOf(options.heartbeatTimeout, spawner.heartbeat)
    const guarded = Heartbeat.guard(Effect.suspend(() => task(contextOf(registry, entry))), entry, limit)
    // Uninterruptible except for the work itself, so a kill always reaches `settle`.
    const body = Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        const started = yield* Effect.exit(start(registry, entry))
        if (Exit.isFailure(started)) return yield* settle(registry, entry, started)
        const exit = yield* Effect.exit(restore(guarded))
        yield* settle(registry, entry, exit, options.result)
      })
    )
    yield* FiberMap.run(spawner.fibers, id, body)
    return record
  }).pipe(
    // Once the record exists the fiber must too, or the task would sit pending until shutdown.
    Effect.uninterruptible,
    Effect.withSpan("TaskManager.spawn", { attributes: { type } })
  )

/** Interrupts the task's fiber and waits for it: its finalizers have run when this returns. */
export const kill = (spawner: Spawner, entry: Registry.Entry): Effect.Effect<Task.TaskRecord> =>
  Effect.gen(function*() {
    entry.killRequested = true
    yield* FiberMap.remove(spawner.fibers, entry.record.id)
    // A fiber interrupted before its first step never reached its own `settle`.
    yield* settle(spawner.registry, entry, Exit.interrupt(FiberId.none))
    return entry.record
  })
