/**
 * Durable runs: @effect/cluster's `ClusterWorkflowEngine` over a
 * `SingleRunner` whose messages are kept in a sqlite file. Each (item, stage)
 * is an activity of the run's workflow execution; its end (the stage's
 * output, encoded by its schema, or the item's `StageFailed` after its
 * retries) is the activity's persisted reply, written as it completes. A run
 * started again under the same id gets those replies back without a session
 * and runs only the rest; an activity the process died in has no reply, and
 * runs again.
 *
 * Interrupting a run (a crossed budget, Ctrl-C) interrupts its activities:
 * the client's interrupt reaches the activity's fiber on the runner, which
 * stops its session, and the engine keeps it as suspended, to be run again
 * by a later run, not redelivered in this one (`test/ClusterEngine.test.ts`
 * shows it on the installed versions).
 *
 * One process at a time per file: a `SingleRunner` owns every shard of the
 * messages it keeps.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import type { WorkflowEngine } from "@effect/workflow/WorkflowEngine"
import { Effect, FiberRef, Layer, LogLevel } from "effect"
import { workflow } from "./internal/workflow.js"

/**
 * The run's workflow, registered: its activities are messages to the
 * workflow's entity. A run never executes the workflow itself, only its
 * activities, so its body is never run.
 */
const registered = workflow.toLayer(() => Effect.never)

/**
 * The durable engine over the `SqlClient` in context; its tables are created
 * if need be. @effect/cluster is loaded when the layer is built, not with
 * this module: every `skein` command imports it, few run a durable pipeline.
 * The runner's own logs (a warning while it registers itself, say) stay out
 * of the command's output.
 */
export const layer: Layer.Layer<WorkflowEngine, never, SqlClient.SqlClient> = Layer.unwrapEffect(
  Effect.promise(() => Promise.all([import("@effect/cluster/ClusterWorkflowEngine"), import("@effect/cluster/SingleRunner")])).pipe(
    Effect.map(([ClusterWorkflowEngine, SingleRunner]) =>
      registered.pipe(
        Layer.provideMerge(ClusterWorkflowEngine.layer),
        Layer.provide(SingleRunner.layer({
          runnerStorage: "memory",
          // Replies and stored messages are polled; the defaults (200 ms, 10 s) would hold every item, and a resumed run's first.
          shardingConfig: { entityMessagePollInterval: "250 millis", entityReplyPollInterval: "20 millis" }
        })),
        Layer.orDie
      )
    )
  )
).pipe(Layer.locally(FiberRef.currentMinimumLogLevel, LogLevel.Error))

/** The durable engine over a sqlite file of its own (created if missing). */
export const layerSqlite = (filename: string): Layer.Layer<WorkflowEngine> =>
  layer.pipe(Layer.provide(SqliteClient.layer({ filename })), Layer.orDie)
