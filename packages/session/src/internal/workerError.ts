/**
 * The errors of forked workers, here so that the pool's internal units can
 * raise them; `Worker` re-exports them as its own.
 */
import * as Schema from "effect/Schema"

/** The worker's task ended (killed, or its runtime stopped) before it had a result. */
export class WorkerKilled extends Schema.TaggedError<WorkerKilled>()("WorkerKilled", {
  taskId: Schema.String,
  status: Schema.String
}) {}

/** The worker ran past its `timeout`; its process was stopped. */
export class WorkerTimeout extends Schema.TaggedError<WorkerTimeout>()("WorkerTimeout", {
  taskId: Schema.String,
  timeoutMillis: Schema.Number
}) {}

/** The worker failed: it could not start, its CLI exited mid-turn, or its sidechain could not be written. */
export class WorkerFailed extends Schema.TaggedError<WorkerFailed>()("WorkerFailed", {
  taskId: Schema.String,
  /** `_tag` of the underlying error, e.g. `CliExited`. */
  reason: Schema.String,
  message: Schema.String
}) {}

/**
 * The TranscriptStore's root is not the parent CLI's config folder: the
 * sidechain would land beside another session. Give both the same root.
 */
export class SidechainMisplaced extends Schema.TaggedError<SidechainMisplaced>()("SidechainMisplaced", {
  expected: Schema.String,
  actual: Schema.String
}) {}

export type WorkerError = WorkerKilled | WorkerTimeout | WorkerFailed

/** Any failure of the worker's run as a WorkerError, keeping the ones that already are. */
export const failedWith = (taskId: string) => (error: { readonly _tag: string; readonly message: string }): WorkerError =>
  error instanceof WorkerTimeout || error instanceof WorkerKilled || error instanceof WorkerFailed
    ? error
    : new WorkerFailed({ taskId, reason: error._tag, message: error.message })
