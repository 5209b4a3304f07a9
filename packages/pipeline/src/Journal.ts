/**
 * A durable workflow engine for pipeline runs: @effect/workflow's engine
 * interface over one sqlite table, where each activity's end (an
 * (item, stage) result, encoded by the stage's output schema, or the item's
 * own failure after its retries) is written as it completes. A run started
 * again under the same id finds what is recorded there and runs only the rest.
 *
 * A recorded failure is run again by default (`RecordedFailures` "retry":
 * what failed, a stage fixed since or a model that flaked, is what a resumed
 * run is for), and the activity sees it as `EarlierFailure`; with "keep" it is
 * answered from the journal like a result, and nothing is sent for it. Only
 * the item's own failures are recorded (an error tagged `StageFailed`): the
 * budget's refusal, an interruption or a defect leave no row, so the item is
 * simply pending.
 *
 * Why not `ClusterWorkflowEngine` over `SingleRunner`: in @effect/cluster
 * 0.60 its activities are persisted RPCs marked uninterruptible on the
 * server, and an interrupted one is delivered again. A run that crosses its
 * budget, or is stopped with Ctrl-C, must interrupt every session in flight
 * and start none after; here an activity is a plain fiber of the run, so
 * interruption reaches its session and nothing is redelivered.
 * `test/ClusterEngine.test.ts` shows it on the installed version.
 *
 * Durable deferreds and clocks, which pipelines do not use, are kept in
 * memory only.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import type * as Activity from "@effect/workflow/Activity"
import * as Workflow from "@effect/workflow/Workflow"
import { makeUnsafe, WorkflowEngine, WorkflowInstance } from "@effect/workflow/WorkflowEngine"
import { Cause, Context, Effect, Exit, Layer, Option, Schema } from "effect"

/**
 * What a run does with an activity whose failure an earlier run recorded:
 * run it again ("retry", the default), or answer with that failure ("keep").
 */
export class RecordedFailures extends Context.Reference<RecordedFailures>()("@skein/pipeline/Journal/RecordedFailures", {
  defaultValue: (): "retry" | "keep" => "retry"
}) {}

/** Inside an activity run again after a recorded failure: that failure, as recorded (encoded). */
export class EarlierFailure extends Context.Reference<EarlierFailure>()("@skein/pipeline/Journal/EarlierFailure", {
  defaultValue: (): Option.Option<unknown> => Option.none()
}) {}

/** A recorded end: the encoded output, or the encoded error. */
const Recorded = Schema.parseJson(Schema.Union(
  Schema.Struct({ _tag: Schema.Literal("Success"), value: Schema.Unknown }),
  Schema.Struct({ _tag: Schema.Literal("Failure"), error: Schema.Unknown })
))
type Recorded = typeof Recorded.Type

const Row = Schema.Struct({ exit: Recorded })
const table = "skein_pipeline_activities"

/** An item's own failure, worth recording: not the budget's refusal, an interruption or a defect. */
const ownFailure = (cause: Cause.Cause<unknown>): Option.Option<unknown> =>
  Option.filter(
    Cause.failureOption(cause),
    (error) => typeof error === "object" && error !== null && "_tag" in error && error._tag === "StageFailed"
  )

/** The engine over the `SqlClient` in context; it creates its table if need be. */
export const make = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE IF NOT EXISTS ${sql(table)} (
    execution_id TEXT NOT NULL,
    activity TEXT NOT NULL,
    exit TEXT NOT NULL,
    recorded_at INTEGER NOT NULL,
    PRIMARY KEY (execution_id, activity)
  )`.pipe(Effect.orDie)
  const workflows = new Map<string, (payload: object, executionId: string) => Effect.Effect<unknown, unknown, WorkflowInstance | WorkflowEngine>>()
  const deferreds = new Map<string, Exit.Exit<unknown, unknown>>()

  const recorded = (executionId: string, activity: string) =>
    sql`SELECT exit FROM ${sql(table)} WHERE execution_id = ${executionId} AND activity = ${activity}`.pipe(
      Effect.flatMap(Schema.decodeUnknown(Schema.Array(Row))),
      Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => row.exit)),
      Effect.orDie
    )

  const record = (executionId: string, activity: string, exit: Recorded) =>
    Effect.flatMap(Effect.clockWith((clock) => clock.currentTimeMillis), (now) =>
      Effect.flatMap(Schema.encode(Recorded)(exit), (json) =>
        sql`INSERT OR REPLACE INTO ${sql(table)} (execution_id, activity, exit, recorded_at)
          VALUES (${executionId}, ${activity}, ${json}, ${now})`)).pipe(Effect.orDie)

  const activityExecute = (activity: Activity.Any, _attempt: number) =>
    Effect.gen(function*() {
      const instance = yield* WorkflowInstance
      const earlier = yield* recorded(instance.executionId, activity.name)
      if (Option.isSome(earlier)) {
        const exit = earlier.value
        if (exit._tag === "Success") return new Workflow.Complete({ exit: Exit.succeed(exit.value) })
        if ((yield* RecordedFailures) === "keep") return new Workflow.Complete({ exit: Exit.fail(exit.error) })
      }
      const earlierFailure = Option.flatMap(earlier, (exit) => exit._tag === "Failure" ? Option.some(exit.error) : Option.none())
      const exit = yield* Effect.exit(Effect.provideService(activity.executeEncoded, EarlierFailure, earlierFailure))
      if (Exit.isSuccess(exit)) {
        yield* record(instance.executionId, activity.name, { _tag: "Success", value: exit.value })
      } else {
        const failure = ownFailure(exit.cause)
        if (Option.isSome(failure)) yield* record(instance.executionId, activity.name, { _tag: "Failure", error: failure.value })
      }
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
