/**
 * A task's output file and progress: appends go under the task's lock, so
 * they never interleave with a record write of the same task; reads are
 * incremental by byte offset and never split a character.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Task from "../Task.js"
import type { ProgressOptions } from "../TaskManager.js"
import { storeError, type TaskStoreError } from "./taskErrors.js"
import * as TaskEvents from "./taskEvents.js"
import type { Entry, Registry } from "./taskRegistry.js"
import type { OutputChunk } from "./taskStore.js"

export const append = (registry: Registry, entry: Entry, text: string): Effect.Effect<void, TaskStoreError> =>
  entry.lock.withPermits(1)(
    registry.store.append(entry.record.outputFile, text).pipe(Effect.mapError(storeError("append to the output")))
  )

/** At most `maxBytes` from `offset`; a finished task's last bytes are taken whole. */
export const read = (
  registry: Registry,
  entry: Entry,
  offset: number,
  maxBytes: number
): Effect.Effect<OutputChunk, TaskStoreError> =>
  Effect.suspend(() => {
    const record = entry.record
    return registry.store.read(record.outputFile, offset, { maxBytes, final: Task.isTerminal(record.status) }).pipe(
      Effect.mapError(storeError("read the output"))
    )
  })

export const progress = (registry: Registry, entry: Entry, options?: ProgressOptions): Effect.Effect<void> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => registry.publish(TaskEvents.progress(entry.record, now, options)))
