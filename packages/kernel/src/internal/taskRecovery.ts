/**
 * Loading the records a previous process left. A task it left pending or
 * running lost its fiber (or the CLI running it) with that process, so it is
 * recorded `interrupted`; finished tasks are registered as they are.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Task from "../Task.js"
import type { Recovery } from "../TaskManager.js"
import { storeError, type TaskStoreError } from "./taskErrors.js"
import * as Registry from "./taskRegistry.js"

/** The record of a task whose runtime went away under it. */
export const interruptedAt = (record: Task.TaskRecord, now: number): Task.TaskRecord => ({
  ...record,
  status: "interrupted",
  updatedAt: now,
  endedAt: now,
  notified: false
})

/** Registers every record on disk. Notices wait for `notifyPending`: nobody can have subscribed yet. */
export const recover = (registry: Registry.Registry): Effect.Effect<Recovery, TaskStoreError> =>
  Effect.gen(function*() {
    const loaded = yield* registry.store.load.pipe(Effect.mapError(storeError("read the tasks folder")))
    const interrupted: Array<Task.TaskId> = []
    const loadedAt = yield* Clock.currentTimeMillis
    for (const record of loaded.records) {
      if (Task.isTerminal(record.status)) {
        yield* Registry.add(registry, record)
        continue
      }
      const next = interruptedAt(record, loadedAt)
      yield* registry.store.write(next).pipe(
        Effect.catchAll((error) => Effect.logWarning(`could not record task ${record.id} as interrupted`, error))
      )
      yield* Registry.add(registry, next)
      interrupted.push(record.id)
    }
    for (const corrupt of loaded.corrupt) {
      yield* Effect.logWarning(`skipping a corrupt task record: ${corrupt.file}: ${corrupt.message}`)
    }
    return {
      interrupted,
      unnotified: Array.from(registry.entries.values())
        .filter((entry) => !entry.record.notified)
        .map((entry) => entry.record.id),
      corrupt: loaded.corrupt
    }
  })
