/**
 * The TaskManager's entries: one per task, loaded or new, each with the lock
 * that serializes its changes. A change is written to the store first and
 * only then made current and published, so a failed write changes nothing.
 * Notices go out here, exactly once per finished task.
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as PubSub from "effect/PubSub"
import * as Ref from "effect/Ref"
import * as Task from "../Task.js"
import { storeError, TaskNotFound, type TaskStoreError } from "./taskErrors.js"
import * as TaskEvents from "./taskEvents.js"
import type * as TaskStore from "./taskStore.js"

export interface Entry {
  record: Task.TaskRecord
  /** Serializes changes to one task: each is validated, written, then published. */
  readonly lock: Effect.Semaphore
  readonly done: Deferred.Deferred<Task.TaskRecord>
  lastBeat: number
  killRequested: boolean
  readonly onKill: Effect.Effect<void> | undefined
}

export interface Registry {
  readonly store: TaskStore.Store
  readonly entries: Map<string, Entry>
  readonly publish: (event: Task.TaskEvent) => Effect.Effect<void>
  /** Publish a finished task's notice at once; otherwise only `notifyPending` does. */
  readonly autoNotify: boolean
  /** Set when the manager's scope starts to close: no more notices, and interruptions mean shutdown. */
  readonly closing: Ref.Ref<boolean>
}

export const make = (
  store: TaskStore.Store,
  pubsub: PubSub.PubSub<Task.TaskEvent>,
  options: { readonly autoNotify: boolean }
): Effect.Effect<Registry> =>
  Effect.map(Ref.make(false), (closing) => ({
    store,
    entries: new Map(),
    publish: (event) => PubSub.publish(pubsub, event).pipe(Effect.asVoid),
    autoNotify: options.autoNotify,
    closing
  }))

/** Registers a task; a terminal one wakes its `await`ers at once. */
export const add = (registry: Registry, record: Task.TaskRecord, onKill?: Effect.Effect<void>) =>
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
    registry.entries.set(record.id, entry)
    return entry
  })

export const lookup = (registry: Registry, id: string): Effect.Effect<Entry, TaskNotFound> =>
  Effect.suspend(() => {
    const entry = registry.entries.get(id)
    return entry === undefined ? Effect.fail(new TaskNotFound({ id })) : Effect.succeed(entry)
  })

/** Writes the record, then makes it current: a failed write changes nothing. */
export const commit = (
  registry: Registry,
  entry: Entry,
  next: Task.TaskRecord,
  operation: string
): Effect.Effect<void, TaskStoreError> =>
  registry.store.write(next).pipe(
    Effect.mapError(storeError(operation)),
    Effect.tap(() => Effect.sync(() => (entry.record = next)))
  )

/**
 * Sends a finished task's notice unless it went out already. The flag is
 * written before the notice goes out, so a crash can lose a notice in that
 * instant but never send one twice; a crash before the write leaves the task
 * unnotified and the next start sends it.
 */
export const notify = (registry: Registry, entry: Entry): Effect.Effect<boolean, TaskStoreError> =>
  entry.lock.withPermits(1)(
    Effect.gen(function*() {
      const record = entry.record
      if (!Task.isTerminal(record.status) || record.notified) return false
      const next: Task.TaskRecord = { ...record, notified: true }
      yield* commit(registry, entry, next, "record a notice")
      yield* registry.publish(TaskEvents.notification(next))
      return true
    })
  ).pipe(Effect.uninterruptible)

/** After a task's terminal write: its notice (unless deferred), then wake `await`ers with the settled record. */
export const finish = (registry: Registry, entry: Entry): Effect.Effect<void> =>
  Effect.gen(function*() {
    if (registry.autoNotify && !(yield* Ref.get(registry.closing))) {
      yield* notify(registry, entry).pipe(
        Effect.catchAll((error) => Effect.logWarning("task notice deferred", error))
      )
    }
    yield* Deferred.succeed(entry.done, entry.record)
  })

/** Every finished task not yet notified, oldest first, notified now. */
export const notifyPending = (registry: Registry): Effect.Effect<ReadonlyArray<Task.TaskId>, TaskStoreError> =>
  Effect.gen(function*() {
    const waiting = Array.from(registry.entries.values())
      .filter((entry) => Task.isTerminal(entry.record.status) && !entry.record.notified)
      .sort((a, b) => (a.record.endedAt ?? a.record.updatedAt) - (b.record.endedAt ?? b.record.updatedAt))
    const sent: Array<Task.TaskId> = []
    for (const entry of waiting) {
      if (yield* notify(registry, entry)) sent.push(entry.record.id)
    }
    return sent
  })
