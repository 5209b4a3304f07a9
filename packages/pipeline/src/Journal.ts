/**
 * A durable workflow engine for pipeline runs: @effect/workflow's engine
 * interface over one sqlite table, where each activity's success (an
 * (item, stage) result, encoded by the stage's output schema) is written as
 * it completes. A run started again under the same id finds its recorded
 * results there and runs only the rest.
 *
 * Why not `ClusterWorkflowEngine` over `SingleRunner`: in @effect/cluster
 * 0.60 its activities are persisted RPCs marked uninterruptible on the
 * server, and an interrupted one is delivered again. A run that crosses its
 * budget, or is stopped with Ctrl-C, must interrupt every session in flight
 * and start none after; here an activity is a plain fiber of the run, so
 * interruption reaches its session and nothing is redelivered.
 *
 * Failures are not recorded: an item that failed is tried again by the next
 * run. Durable deferreds and clocks, which pipelines do not use, are kept in
 * memory only.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import type * as Activity from "@effect/workflow/Activity"
import * as Workflow from "@effect/workflow/Workflow"
import { makeUnsafe, WorkflowEngine, WorkflowInstance } from "@effect/workflow/WorkflowEngine"
import { Effect, Exit, Layer, Option, Schema } from "effect"

const Row = Schema.Struct({ output: Schema.String })
const table = "skein_pipeline_results"

/** The engine over the `SqlClient` in context; it creates its table if need be. */
export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE IF NOT EXISTS ${sql(table)} (
    execution_id TEXT NOT NULL,
    activity TEXT NOT NULL,
    output TEXT NOT NULL,
    recorded_at INTEGER NOT NULL,
    PRIMARY KEY (execution_id, activity)
  )`.pipe(Effect.orDie)
  const workflows = new Map<string, (payload: object, executionId: string) => Effect.Effect<unknown, unknown, WorkflowInstance | WorkflowEngine>>()
  const deferreds = new Map<string, Exit.Exit<unknown, unknown>>()

  const recorded = (executionId: string, activity: string) =>
    sql`SELECT output FROM ${sql(table)} WHERE execution_id = ${executionId} AND activity = ${activity}`.pipe(
      Effect.flatMap(Schema.decodeUnknown(Schema.Array(Row))),
      Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row): unknown => JSON.parse(row.output))),
      Effect.orDie
    )

  const record = (executionId: string, activity: string, output: unknown) =>
    Effect.flatMap(Effect.clockWith((clock) => clock.currentTimeMillis), (now) =>
      sql`INSERT OR REPLACE INTO ${sql(table)} (execution_id, activity, output, recorded_at)
          VALUES (${executionId}, ${activity}, ${JSON.stringify(output) ?? "null"}, ${now})`).pipe(Effect.orDie)

  const activityExecute = (activity: Activity.Any, _attempt: number) =>
    Effect.gen(function*() {
      const instance = yield* WorkflowInstance
      const done = yield* recorded(instance.executionId, activity.name)
      if (Option.isSome(done)) return new Workflow.Complete({ exit: Exit.succeed(done.value) })
      const exit = yield* Effect.exit(activity.executeEncoded)
      if (Exit.isSuccess(exit)) yield* record(instance.executionId, activity.name, exit.value)
      return new Workflow.Complete({ exit })
      // `Activity.Any` types its effect with `any`: this states what the engine interface expects of it.
    }) as Effect.Effect<Workflow.Result<unknown, unknown>, never, WorkflowInstance>

  const engine = makeUnsafe({
    register: (workflow, execute) => Effect.sync(() => void workflows.set(workflow.name, execute)),
    execute: (workflow, options) =>
      Effect.gen(function*() {
        const execute = workflows.get(workflow.name)
        if (execute === undefined) return yield* Effect.dieMessage(`workflow ${workflow.name} is not registered`)
        const instance = WorkflowInstance.initial(workflow, options.executionId)
        const result = yield* execute(options.payload, options.executionId).pipe(
          Workflow.intoResult,
          Effect.provideService(WorkflowInstance, instance),
          Effect.provideService(WorkflowEngine, engine)
        )
        return options.discard ? undefined : result
        // The interface's return type depends on `discard`; both branches are answered above.
      }) as never,
    poll: () => Effect.succeed(undefined),
    interrupt: () => Effect.void,
    resume: () => Effect.void,
    activityExecute,
    deferredResult: (deferred) =>
      Effect.map(WorkflowInstance, (instance) => deferreds.get(`${instance.executionId}/${deferred.name}`)),
    deferredDone: (options) => Effect.sync(() => void deferreds.set(`${options.executionId}/${options.deferredName}`, options.exit)),
    scheduleClock: () => Effect.dieMessage("the pipeline journal keeps no durable clocks")
  })
  return engine
})

/** The engine over the `SqlClient` in context. */
export const layer: Layer.Layer<WorkflowEngine, never, SqlClient.SqlClient> = Layer.effect(WorkflowEngine, make)

/** The engine over a sqlite file of its own (created if missing). */
export const layerSqlite = (filename: string): Layer.Layer<WorkflowEngine> =>
  layer.pipe(Layer.provide(SqliteClient.layer({ filename })), Layer.orDie)
