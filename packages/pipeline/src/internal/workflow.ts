/**
 * The one workflow of every run: its executions are runs, keyed by run id,
 * and each (item, stage) is an activity of the run's execution.
 */
import * as Workflow from "@effect/workflow/Workflow"
import { Schema } from "effect"

export const workflow = Workflow.make({
  name: "skein/pipeline",
  payload: { runId: Schema.String },
  idempotencyKey: ({ runId }) => runId
})
