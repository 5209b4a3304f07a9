/**
 * The TaskManager's errors, here so that its internal units can raise them;
 * `TaskManager` re-exports them as its own.
 */
import type { PlatformError } from "@effect/platform/Error"
import * as Schema from "effect/Schema"

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

export const storeError = (operation: string) => (error: PlatformError) =>
  new TaskStoreError({ operation, message: error.message })
