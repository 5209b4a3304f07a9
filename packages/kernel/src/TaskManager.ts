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
import type { PlatformError } from "@effect/platform/Error"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as FiberMap from "effect/FiberMap"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as PubSub from "effect/PubSub"
import type * as Queue from "effect/Queue"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Task from "./Task.js"
import * as TaskStore from "./internal/taskStore.js"

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

export class TaskNotFound extends Schema.TaggedError<TaskNotFound>()("TaskNotFound", {
  id: Schema.String
}) {}

export class TaskAlreadyExists extends Schema.TaggedError<TaskAlreadyExists>()("TaskAlreadyExists", {
  id: Schema.String
}) {}

/** A status change was asked of a task the manager runs itself; only its fiber decides that. */
export class TaskNotTracked extends Schema.TaggedError<TaskNotTracked>()("TaskNotTracked", {
  id: Schema.String
}) {}

/** A task's record or output file could not be written or read. */
export class TaskStoreError extends Schema.TaggedError<TaskStoreError>()("TaskStoreError", {
  operation: Schema.String,
  message: Schema.String
}) {}

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

interface Entry {
  record: Task.TaskRecord
  /** Serializes changes to one task: each is validated, written, then published. */
  readonly lock: Effect.Semaphore
  readonly done: Deferred.Deferred<Task.TaskRecord>
  lastBeat: number
  killRequested: boolean
  readonly onKill: Effect.Effect<void> | undefined
}

const storeError = (operation: string) => (error: PlatformError) =>
  new TaskStoreError({ operation, message: error.message })

/** A copy that survives a JSON round trip, or nothing. */
const plainJson = (value: unknown): unknown => {
  if (value === undefined) return undefined
  try {
    const text = JSON.stringify(value)
    return text === undefined ? undefined : JSON.parse(text)
  } catch {
    return undefined
  }
}

const failureTag = (cause: Cause.Cause<unknown>): string | undefined =>
  Option.match(Cause.failureOption(cause), {
    onNone: () => undefined,
    onSome: (error) =>
      Predicate.hasProperty(error, "_tag") && typeof error._tag === "string" ? error._tag : undefined
  })

const firstLine = (text: string): string => text.split("\n", 1)[0] ?? ""

const summaryOf = (record: Task.TaskRecord): string => {
  if (record.summary !== undefined) return record.summary
  const name = `Task "${record.description}"`
  switch (record.status) {
    case "completed":
      return `${name} completed`
    case "failed":
      return `${name} failed: ${firstLine(record.error ?? "unknown error")}`
    case "killed":
      return `${name} was stopped`
    case "interrupted":
      return `${name} was interrupted: the runtime stopped while it ran`
    default:
      return `${name} is ${record.status}`
  }
}

const startedEvent = (record: Task.TaskRecord): Task.TaskStarted => ({
  type: "system",
  subtype: "task_started",
  task_id: record.id,
  description: record.description,
  task_type: record.type,
  tool_use_id: record.toolUseId,
  parent_task_id: record.parentTaskId
})

const updatedEvent = (id: string, patch: Task.TaskUpdated["patch"]): Task.TaskUpdated => ({
  type: "system",
  subtype: "task_updated",
  task_id: id,
  patch
})

const notificationEvent = (record: Task.TaskRecord): Task.TaskNotification => ({
  type: "system",
  subtype: "task_notification",
  task_id: record.id,
  tool_use_id: record.toolUseId,
  status: Task.noticeStatus(record.status),
  output_file: record.outputFile,
  summary: summaryOf(record)
})

/** Builds a manager whose tasks live as long as the enclosing scope. */
export const make = Effect.fn("TaskManager.make")(function*(options: TaskManagerOptions) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const root = path.resolve(options.root)
  const store = TaskStore.make(fs, path, root)
  const autoNotify = options.autoNotify ?? true
  const maxReadBytes = Math.max(4, options.maxReadBytes ?? 1024 * 1024)
  const defaultHeartbeat = options.heartbeatTimeout === undefined ? undefined : Duration.decode(options.heartbeatTimeout)

  yield* store.ensureDir.pipe(Effect.mapError(storeError("create the tasks folder")))

  const entries = new Map<string, Entry>()
  let closing = false

  // Finalizers run last-added first: stop notifying, interrupt the fibers,
  // settle any fiber that never started, and only then close the event hub.
  const pubsub = yield* Effect.acquireRelease(PubSub.unbounded<Task.TaskEvent>(), PubSub.shutdown)
  const publish = (event: Task.TaskEvent) => PubSub.publish(pubsub, event).pipe(Effect.asVoid)

  const makeEntry = (record: Task.TaskRecord, onKill?: Effect.Effect<void>) =>
    Effect.gen(function*() {
      const entry: Entry = {
        record,
        lock: yield* Effect.makeSemaphore(1),
        done: yield* Deferred.make<Task.TaskRecord>(),
        lastBeat: yield* Clock.currentTimeMillis,
        killRequested: false,
        onKill
      }
      if (Task.isTerminal(record.status)) yield* Deferred.succeed(entry.done, record)
      entries.set(record.id, entry)
      return entry
    })

  const lookup = (id: string) =>
    Effect.suspend(() => {
      const entry = entries.get(id)
      return entry === undefined ? Effect.fail(new TaskNotFound({ id })) : Effect.succeed(entry)
    })

  /** Writes the record, then makes it current: a failed write changes nothing. */
  const commit = (entry: Entry, next: Task.TaskRecord, operation: string) =>
    store.write(next).pipe(
      Effect.mapError(storeError(operation)),
      Effect.tap(() => Effect.sync(() => (entry.record = next)))
    )

  // ---- notification -------------------------------------------------------

  /**
   * The flag is written before the notice goes out, so a crash can lose a
   * notice in that instant but never send one twice; a crash before the
   * write leaves the task unnotified and the next start sends it.
   */
  const notify = (entry: Entry) =>
    entry.lock.withPermits(1)(
      Effect.gen(function*() {
        const record = entry.record
        if (!Task.isTerminal(record.status) || record.notified) return false
        const next: Task.TaskRecord = { ...record, notified: true }
        yield* commit(entry, next, "record a notice")
        yield* publish(notificationEvent(next))
        return true
      })
    ).pipe(Effect.uninterruptible)

  const maybeNotify = (entry: Entry) =>
    autoNotify && !closing
      ? notify(entry).pipe(
        Effect.asVoid,
        Effect.catchAll((error) => Effect.logWarning("task notice deferred", error))
      )
      : Effect.void

  /** After a task's terminal write: its notice (unless deferred), then wake `await`ers with the settled record. */
  const finish = (entry: Entry) =>
    maybeNotify(entry).pipe(Effect.zipRight(Effect.suspend(() => Deferred.succeed(entry.done, entry.record))))

  const notifyPending = Effect.gen(function*() {
    const waiting = Array.from(entries.values())
      .filter((entry) => Task.isTerminal(entry.record.status) && !entry.record.notified)
      .sort((a, b) => (a.record.endedAt ?? a.record.updatedAt) - (b.record.endedAt ?? b.record.updatedAt))
    const sent: Array<Task.TaskId> = []
    for (const entry of waiting) {
      if (yield* notify(entry)) sent.push(entry.record.id)
    }
    return sent
  }).pipe(Effect.withSpan("TaskManager.notifyPending"))

  // ---- loading ------------------------------------------------------------

  const loaded = yield* store.load.pipe(Effect.mapError(storeError("read the tasks folder")))
  const interrupted: Array<Task.TaskId> = []
  const loadedAt = yield* Clock.currentTimeMillis
  for (const record of loaded.records) {
    if (Task.isTerminal(record.status)) {
      yield* makeEntry(record)
      continue
    }
    // Its fiber (or the CLI running it) died with the previous process.
    const next: Task.TaskRecord = {
      ...record,
      status: "interrupted",
      updatedAt: loadedAt,
      endedAt: loadedAt,
      notified: false
    }
    yield* store.write(next).pipe(
      Effect.catchAll((error) => Effect.logWarning(`could not record task ${record.id} as interrupted`, error))
    )
    yield* makeEntry(next)
    interrupted.push(record.id)
  }
  for (const corrupt of loaded.corrupt) {
    yield* Effect.logWarning(`skipping a corrupt task record: ${corrupt.file}: ${corrupt.message}`)
  }
  const recovery: Recovery = {
    interrupted,
    unnotified: Array.from(entries.values())
      .filter((entry) => !entry.record.notified)
      .map((entry) => entry.record.id),
    corrupt: loaded.corrupt
  }

  // ---- settling a spawned task's end --------------------------------------

  /** Applies a fiber's exit once; later calls (kill's fallback) find it terminal. */
  const settle = <A, I>(entry: Entry, exit: Exit.Exit<A, unknown>, schema?: Schema.Schema<A, I>) =>
    entry.lock.withPermits(1)(
      Effect.gen(function*() {
        const record = entry.record
        if (Task.isTerminal(record.status)) return
        const now = yield* Clock.currentTimeMillis
        const base = { ...record, updatedAt: now, endedAt: now, notified: false }
        let next: Task.TaskRecord
        if (Exit.isSuccess(exit)) {
          const result = schema === undefined
            ? plainJson(exit.value)
            : Either.getOrUndefined(Either.map(Schema.encodeEither(schema)(exit.value), plainJson))
          if (result === undefined && exit.value !== undefined) {
            yield* Effect.logWarning(`the result of task ${record.id} is not JSON; the record keeps none`)
          }
          next = { ...base, status: "completed", result }
        } else if (Cause.isInterruptedOnly(exit.cause)) {
          // A shutdown is the runtime stopping under the task; anything else stopped it on purpose.
          next = { ...base, status: entry.killRequested || !closing ? "killed" : "interrupted" }
        } else {
          next = { ...base, status: "failed", error: Cause.pretty(exit.cause), errorTag: failureTag(exit.cause) }
        }
        const to = Either.getOrElse(Task.transition(record.id, record.status, next.status), () => "failed" as const)
        next = { ...next, status: to }
        // The fiber is over whatever the disk says; a lost write shows as `interrupted` on the next start.
        entry.record = next
        yield* store.write(next).pipe(
          Effect.catchAll((error) => Effect.logWarning(`could not record the end of task ${record.id}`, error))
        )
        yield* publish(updatedEvent(record.id, { status: to, end_time: now, error: next.error }))
      })
    ).pipe(Effect.zipRight(finish(entry)), Effect.uninterruptible)

  yield* Effect.addFinalizer(() =>
    Effect.forEach(
      entries.values(),
      (entry) =>
        entry.record.supervision === "spawned" ? settle(entry, Exit.interrupt(FiberId.none)) : Effect.void,
      { discard: true }
    )
  )
  const fibers = yield* FiberMap.make<string>()
  yield* Effect.addFinalizer(() => Effect.sync(() => (closing = true)))

  // ---- spawned tasks ------------------------------------------------------

  const freshId = (type: Task.TaskType) =>
    Effect.gen(function*() {
      for (;;) {
        const id = Task.makeId(type)
        if (entries.has(id)) continue
        const taken = yield* fs.exists(store.recordPath(id)).pipe(Effect.orElseSucceed(() => true))
        if (!taken) return id
      }
    })

  const heartbeatOf = (entry: Entry) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => (entry.lastBeat = now)))

  const watchdog = (entry: Entry, timeoutMillis: number) =>
    Effect.gen(function*() {
      for (;;) {
        const now = yield* Clock.currentTimeMillis
        const remaining = entry.lastBeat + timeoutMillis - now
        if (remaining <= 0) {
          return yield* new Task.HeartbeatTimeout({ id: entry.record.id, timeoutMillis })
        }
        yield* Effect.sleep(Duration.millis(remaining))
      }
    })

  const progressOf = (entry: Entry, options: ProgressOptions = {}) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const record = entry.record
      yield* publish({
        type: "system",
        subtype: "task_progress",
        task_id: record.id,
        tool_use_id: record.toolUseId,
        description: record.description,
        usage: {
          total_tokens: options.totalTokens ?? 0,
          tool_uses: options.toolUses ?? 0,
          duration_ms: Math.max(0, now - (record.startedAt ?? record.createdAt))
        },
        last_tool_name: options.lastToolName,
        summary: options.summary
      })
    })

  const appendTo = (entry: Entry, text: string) =>
    entry.lock.withPermits(1)(
      store.append(entry.record.outputFile, text).pipe(Effect.mapError(storeError("append to the output")))
    )

  const start = (entry: Entry) =>
    entry.lock.withPermits(1)(
      Effect.gen(function*() {
        const record = entry.record
        const now = yield* Clock.currentTimeMillis
        const to = yield* Task.transition(record.id, record.status, "running")
        yield* commit(entry, { ...record, status: to, updatedAt: now, startedAt: now }, "record the start")
        entry.lastBeat = now
        yield* publish(updatedEvent(record.id, { status: to }))
      })
    )

  const spawn = <A, E, R, I = A>(
    type: Task.TaskType,
    options: SpawnOptions<A, I>,
    task: (context: TaskContext) => Effect.Effect<A, E, R>
  ): Effect.Effect<Task.TaskRecord, TaskStoreError, R> =>
    Effect.gen(function*() {
      const id = yield* freshId(type)
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
        outputFile: store.outputPath(id),
        toolUseId: options.toolUseId,
        parentTaskId: options.parentTaskId,
        notified: false
      }
      yield* store.createOutput(record.outputFile).pipe(Effect.mapError(storeError("create the output file")))
      yield* store.write(record).pipe(Effect.mapError(storeError("record the task")))
      const entry = yield* makeEntry(record)
      yield* publish(startedEvent(record))

      const limit = options.heartbeatTimeout === undefined
        ? defaultHeartbeat
        : Duration.decode(options.heartbeatTimeout)
      const context: TaskContext = {
        id,
        outputFile: record.outputFile,
        append: (text) => appendTo(entry, text),
        heartbeat: heartbeatOf(entry),
        progress: (progress) => progressOf(entry, progress)
      }
      const work = Effect.suspend(() => task(context))
      const guarded = limit === undefined || !Duration.isFinite(limit)
        ? work
        : Effect.raceFirst(work, watchdog(entry, Duration.toMillis(limit)))

      // Uninterruptible except for the work itself, so a kill always reaches `settle`.
      const body = Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          const started = yield* Effect.exit(start(entry))
          if (Exit.isFailure(started)) return yield* settle(entry, started)
          const exit = yield* Effect.exit(restore(guarded))
          yield* settle(entry, exit, options.result)
        })
      )
      yield* FiberMap.run(fibers, id, body)
      return record
    }).pipe(
      // Once the record exists the fiber must too, or the task would sit pending until shutdown.
      Effect.uninterruptible,
      Effect.withSpan("TaskManager.spawn", { attributes: { type } })
    )

  // ---- tracked tasks ------------------------------------------------------

  const track = Effect.fn("TaskManager.track")(
    function*(id: string, type: Task.TaskType, description: string, trackOptions: TrackOptions = {}) {
      const taskId = yield* Task.parseId(id, type)
      if (entries.has(taskId)) return yield* new TaskAlreadyExists({ id })
      const now = yield* Clock.currentTimeMillis
      const status = trackOptions.status ?? "running"
      const record: Task.TaskRecord = {
        version: 1,
        id: taskId,
        type,
        description,
        status,
        supervision: "tracked",
        createdAt: now,
        updatedAt: now,
        startedAt: status === "running" ? now : undefined,
        outputFile: trackOptions.outputFile ?? store.outputPath(taskId),
        toolUseId: trackOptions.toolUseId,
        parentTaskId: trackOptions.parentTaskId,
        notified: false
      }
      if (trackOptions.outputFile === undefined) {
        yield* store.createOutput(record.outputFile).pipe(Effect.mapError(storeError("create the output file")))
      }
      yield* store.write(record).pipe(Effect.mapError(storeError("record the task")))
      yield* makeEntry(record, trackOptions.onKill)
      yield* publish(startedEvent(record))
      return record
    }
  )

  /** Applies a patch under the task's lock; a terminal task takes none. */
  const applyPatch = (entry: Entry, patch: Task.TaskPatch) =>
    entry.lock.withPermits(1)(
      Effect.gen(function*() {
        const record = entry.record
        if (Task.isTerminal(record.status)) {
          return yield* new Task.IllegalTransition({ id: record.id, from: record.status, to: patch.status ?? record.status })
        }
        const changes = patch.status !== undefined && patch.status !== record.status
        if (changes && record.supervision === "spawned") return yield* new TaskNotTracked({ id: record.id })
        const to = changes && patch.status !== undefined
          ? yield* Task.transition(record.id, record.status, patch.status)
          : record.status
        const now = yield* Clock.currentTimeMillis
        const ends = Task.isTerminal(to)
        const next: Task.TaskRecord = {
          ...record,
          status: to,
          description: patch.description ?? record.description,
          error: patch.error ?? record.error,
          summary: patch.summary ?? record.summary,
          updatedAt: now,
          startedAt: to === "running" && record.startedAt === undefined ? now : record.startedAt,
          endedAt: ends ? now : record.endedAt
        }
        yield* commit(entry, next, "record an update")
        yield* publish(updatedEvent(record.id, {
          status: changes ? to : undefined,
          description: patch.description,
          error: patch.error,
          end_time: ends ? now : undefined
        }))
        return next
      })
    ).pipe(
      Effect.tap((next) => (Task.isTerminal(next.status) ? finish(entry) : Effect.void)),
      Effect.map(() => entry.record)
    )

  const update = Effect.fn("TaskManager.update")(function*(id: string, patch: Task.TaskPatch) {
    const entry = yield* lookup(id)
    return yield* applyPatch(entry, patch)
  })

  const kill = Effect.fn("TaskManager.kill")(function*(id: string) {
    const entry = yield* lookup(id)
    const record = entry.record
    if (Task.isTerminal(record.status)) {
      return yield* new Task.IllegalTransition({ id, from: record.status, to: "killed" })
    }
    if (record.supervision === "tracked") {
      if (entry.onKill !== undefined) yield* entry.onKill
      // Only a spawned task refuses a status patch, and this one is tracked.
      return yield* applyPatch(entry, { status: "killed" }).pipe(Effect.catchTag("TaskNotTracked", Effect.die))
    }
    entry.killRequested = true
    // Interrupts and awaits the fiber: its finalizers have run when this returns.
    yield* FiberMap.remove(fibers, id)
    // A fiber interrupted before its first step never reached its own `settle`.
    yield* settle(entry, Exit.interrupt(FiberId.none))
    return entry.record
  })

  const heartbeat = Effect.fn("TaskManager.heartbeat")(function*(id: string) {
    yield* heartbeatOf(yield* lookup(id))
  })

  const append = Effect.fn("TaskManager.append")(function*(id: string, text: string) {
    yield* appendTo(yield* lookup(id), text)
  })

  const readOutput = Effect.fn("TaskManager.readOutput")(function*(id: string, offset: number) {
    const record = (yield* lookup(id)).record
    return yield* store.read(record.outputFile, offset, {
      maxBytes: maxReadBytes,
      final: Task.isTerminal(record.status)
    }).pipe(Effect.mapError(storeError("read the output")))
  })

  const get = (id: string) => Effect.map(lookup(id), (entry) => entry.record)

  const list = Effect.sync(() => Array.from(entries.values(), (entry) => entry.record))

  const awaitTask = (id: string) => Effect.flatMap(lookup(id), (entry) => Deferred.await(entry.done))

  return TaskManager.of({
    root,
    recovery,
    spawn,
    track,
    update,
    kill,
    heartbeat,
    append,
    readOutput,
    get,
    list,
    await: awaitTask,
    notifyPending,
    subscribe: PubSub.subscribe(pubsub)
  })
})

export const layer = (options: TaskManagerOptions): Layer.Layer<TaskManager, TaskStoreError, FileSystem.FileSystem | Path.Path> =>
  Layer.scoped(TaskManager, make(options))
