/**
 * Tasks the CLI runs and the manager mirrors: their status changes come in
 * as patches (the CLI's `task_updated`), each validated by `Task.transition`,
 * and `kill` asks the CLI to stop them through their `onKill`.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Task from "../Task.js"
import type { TrackOptions } from "../TaskManager.js"
import { storeError, TaskAlreadyExists, TaskNotTracked, type TaskStoreError } from "./taskErrors.js"
import * as TaskEvents from "./taskEvents.js"
import * as Registry from "./taskRegistry.js"

export const track = (
  registry: Registry.Registry,
  id: string,
  type: Task.TaskType,
  description: string,
  options: TrackOptions = {}
): Effect.Effect<Task.TaskRecord, Task.InvalidTaskId | TaskAlreadyExists | TaskStoreError> =>
  Effect.gen(function*() {
    const taskId = yield* Task.parseId(id, type)
    if (registry.entries.has(taskId)) return yield* new TaskAlreadyExists({ id })
    const now = yield* Clock.currentTimeMillis
    const status = options.status ?? "running"
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
      outputFile: options.outputFile ?? registry.store.outputPath(taskId),
      toolUseId: options.toolUseId,
      parentTaskId: options.parentTaskId,
      notified: false
    }
    if (options.outputFile === undefined) {
      yield* registry.store.createOutput(record.outputFile).pipe(Effect.mapError(storeError("create the output file")))
    }
    yield* registry.store.write(record).pipe(Effect.mapError(storeError("record the task")))
    yield* Registry.add(registry, record, options.onKill)
    yield* registry.publish(TaskEvents.started(record))
    return record
  })

/** `record` with `patch` applied at `now`; fails if the patch asks for a step the state machine forbids. */
export const patched = (
  record: Task.TaskRecord,
  patch: Task.TaskPatch,
  now: number
): Effect.Effect<Task.TaskRecord, Task.IllegalTransition | TaskNotTracked> =>
  Effect.gen(function*() {
    if (Task.isTerminal(record.status)) {
      return yield* new Task.IllegalTransition({ id: record.id, from: record.status, to: patch.status ?? record.status })
    }
    const changes = patch.status !== undefined && patch.status !== record.status
    if (changes && record.supervision === "spawned") return yield* new TaskNotTracked({ id: record.id })
    const to = changes && patch.status !== undefined
      ? yield* Task.transition(record.id, record.status, patch.status)
      : record.status
    const ends = Task.isTerminal(to)
    return {
      ...record,
      status: to,
      description: patch.description ?? record.description,
      error: patch.error ?? record.error,
      summary: patch.summary ?? record.summary,
      updatedAt: now,
      startedAt: to === "running" && record.startedAt === undefined ? now : record.startedAt,
      endedAt: ends ? now : record.endedAt
    }
  })

/** Applies a patch under the task's lock; a terminal task takes none. */
export const applyPatch = (
  registry: Registry.Registry,
  entry: Registry.Entry,
  patch: Task.TaskPatch
): Effect.Effect<Task.TaskRecord, Task.IllegalTransition | TaskNotTracked | TaskStoreError> =>
  entry.lock.withPermits(1)(
    Effect.gen(function*() {
      const record = entry.record
      const now = yield* Clock.currentTimeMillis
      const next = yield* patched(record, patch, now)
      const changes = next.status !== record.status
      const ends = Task.isTerminal(next.status)
      yield* Registry.commit(registry, entry, next, "record an update")
      yield* registry.publish(TaskEvents.updated(record.id, {
        status: changes ? next.status : undefined,
        description: patch.description,
        error: patch.error,
        end_time: ends ? now : undefined
      }))
      return next
    })
  ).pipe(
    Effect.tap((next) => (Task.isTerminal(next.status) ? Registry.finish(registry, entry) : Effect.void)),
    Effect.map(() => entry.record)
  )

/** Runs the task's `onKill` (asking the CLI to stop it), then records it killed. */
export const kill = (
  registry: Registry.Registry,
  entry: Registry.Entry
): Effect.Effect<Task.TaskRecord, Task.IllegalTransition | TaskStoreError> =>
  Effect.gen(function*() {
    if (entry.onKill !== undefined) yield* entry.onKill
    // Only a spawned task refuses a status patch, and this one is tracked.
    return yield* applyPatch(registry, entry, { status: "killed" }).pipe(Effect.catchTag("TaskNotTracked", Effect.die))
  })
