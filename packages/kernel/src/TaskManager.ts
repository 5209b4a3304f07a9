/**
 * Background tasks as supervised fibers, plus mirrors of the CLI's own tasks.
 *
 * Each spawned task runs in a FiberMap owned by the manager's scope, so
 * `kill` is interruption: the task's finalizers (its rollback) run and the
 * task ends `killed`. Every state change is validated by `Task.transition`,
 * written to a JSON record, and published as an event shaped like the CLI's
 * own `task_*` system messages.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as FiberMap from "effect/FiberMap"
import * as Layer from "effect/Layer"
import * as PubSub from "effect/PubSub"
import type * as Queue from "effect/Queue"
import * as Ref from "effect/Ref"
import type * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { storeError, type TaskAlreadyExists, type TaskNotFound, type TaskNotTracked, type TaskStoreError } from "./internal/taskErrors.js"
import * as Heartbeat from "./internal/taskHeartbeat.js"
import * as Output from "./internal/taskOutput.js"
import { recover } from "./internal/taskRecovery.js"
import * as Registry from "./internal/taskRegistry.js"
import { settle } from "./internal/taskSettle.js"
import * as Spawn from "./internal/taskSpawn.js"
import * as TaskStore from "./internal/taskStore.js"
import * as Tracked from "./internal/taskTracked.js"
import * as Task from "./Task.js"

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

export { TaskAlreadyExists, TaskNotFound, TaskNotTracked, TaskStoreError } from "./internal/taskErrors.js"

// ---------------------------------------------------------------------------
// Options and shapes
// ---------------------------------------------------------------------------

export interface TaskManagerOptions {
  /** Records and output files live in `<root>/tasks`. */
  readonly root: string
  /** How long a running spawned task may go without a heartbeat; unset means no deadline. */
  readonly heartbeatTimeout?: Duration.DurationInput | undefined
  /**
   * Publish a finished task's notice at once (default). With `false` notices
   * wait for `notifyPending`, e.g. until the session is between turns.
   */
  readonly autoNotify?: boolean | undefined
  /** The most one `readOutput` returns (default 1 MiB). */
  readonly maxReadBytes?: number | undefined
}

export interface SpawnOptions<A, I> {
  readonly description: string
  readonly toolUseId?: string | undefined
  readonly parentTaskId?: string | undefined
  /** This task's heartbeat deadline; `Duration.infinity` turns the manager's default off. */
  readonly heartbeatTimeout?: Duration.DurationInput | undefined
  /** Encodes the result for the record; without it the value is kept if it is plain JSON. */
  readonly result?: Schema.Schema<A, I> | undefined
}

export interface TrackOptions {
  /** `running` unless given: the CLI announces a task once it runs. */
  readonly status?: "pending" | "running" | undefined
  readonly toolUseId?: string | undefined
  readonly parentTaskId?: string | undefined
  /** The CLI's own output file for the task; the manager's file otherwise. */
  readonly outputFile?: string | undefined
  /** Asks the CLI to stop the task (e.g. a `stop_task` request); run by `kill`. */
  readonly onKill?: Effect.Effect<void> | undefined
}

export interface ProgressOptions {
  readonly summary?: string | undefined
  readonly lastToolName?: string | undefined
  readonly totalTokens?: number | undefined
  readonly toolUses?: number | undefined
}

/** What a spawned task's effect may do to its own task. */
export interface TaskContext {
  readonly id: Task.TaskId
  readonly outputFile: string
  readonly append: (text: string) => Effect.Effect<void, TaskStoreError>
  readonly heartbeat: Effect.Effect<void>
  readonly progress: (options?: ProgressOptions) => Effect.Effect<void>
}

/** What loading the records found. */
export interface Recovery {
  /** Tasks a previous process left pending or running, now `interrupted`. */
  readonly interrupted: ReadonlyArray<Task.TaskId>
  /** Finished tasks whose notice has not gone out; `notifyPending` sends them. */
  readonly unnotified: ReadonlyArray<Task.TaskId>
  readonly corrupt: ReadonlyArray<TaskStore.CorruptRecord>
}

export type OutputChunk = TaskStore.OutputChunk
export type CorruptRecord = TaskStore.CorruptRecord

export class TaskManager extends Context.Tag("@skein/kernel/TaskManager")<TaskManager, {
  readonly root: string
  readonly recovery: Recovery
  readonly spawn: <A, E, R, I = A>(
    type: Task.TaskType,
    options: SpawnOptions<A, I>,
    task: (context: TaskContext) => Effect.Effect<A, E, R>
  ) => Effect.Effect<Task.TaskRecord, TaskStoreError, R>
  readonly track: (
    id: string,
    type: Task.TaskType,
    description: string,
    options?: TrackOptions
  ) => Effect.Effect<Task.TaskRecord, Task.InvalidTaskId | TaskAlreadyExists | TaskStoreError>
  readonly update: (
    id: string,
    patch: Task.TaskPatch
  ) => Effect.Effect<Task.TaskRecord, TaskNotFound | Task.IllegalTransition | TaskNotTracked | TaskStoreError>
  /** Interrupts a spawned task (or stops a tracked one) and returns its final record. */
  readonly kill: (id: string) => Effect.Effect<Task.TaskRecord, TaskNotFound | Task.IllegalTransition | TaskStoreError>
  readonly heartbeat: (id: string) => Effect.Effect<void, TaskNotFound>
  readonly append: (id: string, text: string) => Effect.Effect<void, TaskNotFound | TaskStoreError>
  /** What was appended since `offset` (bytes), and where the next read starts. */
  readonly readOutput: (id: string, offset: number) => Effect.Effect<OutputChunk, TaskNotFound | TaskStoreError>
  readonly get: (id: string) => Effect.Effect<Task.TaskRecord, TaskNotFound>
  readonly list: Effect.Effect<ReadonlyArray<Task.TaskRecord>>
  /** Waits until the task is terminal. */
  readonly await: (id: string) => Effect.Effect<Task.TaskRecord, TaskNotFound>
  /**
   * Publishes the notice of every finished task not yet notified, oldest
   * first. Tasks found finished at start always wait for this call: nobody
   * can have subscribed while `make` ran.
   */
  readonly notifyPending: Effect.Effect<ReadonlyArray<Task.TaskId>, TaskStoreError>
  readonly subscribe: Effect.Effect<Queue.Dequeue<Task.TaskEvent>, never, Scope.Scope>
}>() {}

// ---------------------------------------------------------------------------
// Implementation
// ---------------------------------------------------------------------------

/**
 * Builds a manager whose tasks live as long as the enclosing scope. The
 * parts live in `internal/`: the entries and notices (`taskRegistry`), the
 * load (`taskRecovery`), spawned and tracked tasks (`taskSpawn`,
 * `taskTracked`) and the end of a spawned one (`taskSettle`).
 */
export const make = Effect.fn("TaskManager.make")(function*(options: TaskManagerOptions) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const root = path.resolve(options.root)
  const store = TaskStore.make(fs, path, root)
  const maxReadBytes = Math.max(4, options.maxReadBytes ?? 1024 * 1024)
  yield* store.ensureDir.pipe(Effect.mapError(storeError("create the tasks folder")))

  // Finalizers run last-added first: stop notifying, interrupt the fibers,
  // settle any fiber that never started, and only then close the event hub.
  const pubsub = yield* Effect.acquireRelease(PubSub.unbounded<Task.TaskEvent>(), PubSub.shutdown)
  const registry = yield* Registry.make(store, pubsub, { autoNotify: options.autoNotify ?? true })
  const recovery = yield* recover(registry)
  yield* Effect.addFinalizer(() =>
    Effect.forEach(
      registry.entries.values(),
      (entry) => entry.record.supervision === "spawned" ? settle(registry, entry, Exit.interrupt(FiberId.none)) : Effect.void,
      { discard: true }
    )
  )
  const spawner: Spawn.Spawner = {
    registry,
    fibers: yield* FiberMap.make<string>(),
    fs,
    heartbeat: options.heartbeatTimeout === undefined ? undefined : Duration.decode(options.heartbeatTimeout)
  }
  yield* Effect.addFinalizer(() => Ref.set(registry.closing, true))

  const lookup = (id: string) => Registry.lookup(registry, id)

  return TaskManager.of({
    root,
    recovery,
    spawn: (type, spawnOptions, task) => Spawn.spawn(spawner, type, spawnOptions, task),
    track: Effect.fn("TaskManager.track")(function*(id: string, type: Task.TaskType, description: string, trackOptions?: TrackOptions) {
      return yield* Tracked.track(registry, id, type, description, trackOptions)
    }),
    update: Effect.fn("TaskManager.update")(function*(id: string, patch: Task.TaskPatch) {
      return yield* Tracked.applyPatch(registry, yield* lookup(id), patch)
    }),
    kill: Effect.fn("TaskManager.kill")(function*(id: string) {
      const entry = yield* lookup(id)
      const status = entry.record.status
      if (Task.isTerminal(status)) return yield* new Task.IllegalTransition({ id, from: status, to: "killed" })
      return yield* entry.record.supervision === "tracked" ? Tracked.kill(registry, entry) : Spawn.kill(spawner, entry)
    }),
    heartbeat: Effect.fn("TaskManager.heartbeat")(function*(id: string) {
      yield* Heartbeat.beat(yield* lookup(id))
    }),
    append: Effect.fn("TaskManager.append")(function*(id: string, text: string) {
      yield* Output.append(registry, yield* lookup(id), text)
    }),
    readOutput: Effect.fn("TaskManager.readOutput")(function*(id: string, offset: number) {
      return yield* Output.read(registry, yield* lookup(id), offset, maxReadBytes)
    }),
    get: (id) => Effect.map(lookup(id), (entry) => entry.record),
    list: Effect.sync(() => Array.from(registry.entries.values(), (entry) => entry.record)),
    await: (id) => Effect.flatMap(lookup(id), (entry) => Deferred.await(entry.done)),
    notifyPending: Registry.notifyPending(registry).pipe(Effect.withSpan("TaskManager.notifyPending")),
    subscribe: PubSub.subscribe(pubsub)
  })
})

export const layer = (options: TaskManagerOptions): Layer.Layer<TaskManager, TaskStoreError, FileSystem.FileSystem | Path.Path> =>
  Layer.scoped(TaskManager, make(options))
