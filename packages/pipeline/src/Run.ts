/**
 * Running a pipeline over inputs: one workflow execution whose id is the run
 * id, with each (item, stage) an activity of it when a workflow engine is in
 * context. Without one the items simply run; on a durable engine (`Journal`) every
 * result is recorded as it completes, and a run started again with the same
 * id gets the recorded ones back without a session. An item that failed
 * after its retries is recorded too, and a run started again tries it again,
 * reporting the recorded failure as the reason of an `ItemRetried`.
 *
 * A run reports a `Stream` of events and a `Subscribable` summary, counts
 * every turn against its budget, and ends with the outputs in input order,
 * with `BudgetExceeded`, with a failFast stage's failure, or with the input
 * stream's own failure once the items in flight settle.
 */
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import type { Worker } from "@skein/session"
import {
  Cause,
  Chunk,
  Clock,
  Effect,
  Exit,
  Fiber,
  FiberSet,
  Option,
  PubSub,
  RcMap,
  Ref,
  type Scope,
  Stream,
  type Subscribable
} from "effect"
import * as Crypto from "node:crypto"
import * as Budget from "./Budget.js"
import { Launch } from "./Launch.js"
import type { Pipeline } from "./Pipeline.js"
import { BudgetExceeded, type BudgetInvalid, type StageFailed } from "./PipelineError.js"
import { type RunEvent, RunEnded, RunStarted, type Summary } from "./RunEvent.js"
import { type Item, keyed } from "./internal/item.js"
import { type BaseKey, pendingOf, Run, type RunContext } from "./internal/runContext.js"
import * as SummaryCell from "./internal/summaryCell.js"
import { workflow } from "./internal/workflow.js"

export interface Options {
  /** Names the run; a durable run started again with the same id resumes it. Default: a fresh UUID. */
  readonly runId?: string | undefined
  readonly budget?: Budget.Caps | undefined
}

export interface Result<Out> {
  readonly runId: string
  /** The outputs at the end of the pipeline, in input order. */
  readonly outputs: ReadonlyArray<Out>
  readonly summary: Summary
}

export interface Handle<A, E> {
  readonly runId: string
  /** Every event of the run, from its start, whenever the stream is run. */
  readonly events: Stream.Stream<RunEvent>
  readonly summary: Subscribable.Subscribable<Summary>
  /** Waits for the end of the run. */
  readonly await: Effect.Effect<A, E>
}

/** The run's one workflow: its executions are runs, keyed by run id. */
export { workflow }

type Input<In, EI, RI> = Iterable<In> | Stream.Stream<In, EI, RI>

const inputStream = <In, EI, RI>(input: Input<In, EI, RI>): { readonly stream: Stream.Stream<In, EI, RI>; readonly total: number | null } => {
  if (Stream.StreamTypeId in input) return { stream: input, total: null }
  const all = Array.from(input)
  return { stream: Stream.fromIterable(all), total: all.length }
}

const outcomeOf = (exit: Exit.Exit<unknown, unknown>): RunEnded["outcome"] => {
  if (Exit.isSuccess(exit)) return "done"
  if (Exit.isInterrupted(exit)) return "interrupted"
  return Option.exists(Cause.failureOption(exit.cause), (e) => e instanceof BudgetExceeded) ? "budget" : "failed"
}

/**
 * Starts a run in the current scope, folding the pipeline's outputs with
 * `f` in the order they complete; closing the scope interrupts it, and every
 * session below it.
 */
export const startFold = <In, Out, E, R, EI, RI, B>(
  pipeline: Pipeline<In, Out, E, R>,
  input: Input<In, EI, RI>,
  initial: B,
  f: (acc: B, value: Out) => B,
  options: Options = {}
): Effect.Effect<Handle<{ readonly runId: string; readonly value: B; readonly summary: Summary }, E | EI | BudgetExceeded>, BudgetInvalid, Scope.Scope | Launch | Exclude<R, Run> | RI> =>
  startItems(pipeline, input, initial, (acc: B, item: Item<Out>) => f(acc, item.value), options)

const startItems = <In, Out, E, R, EI, RI, B>(
  pipeline: Pipeline<In, Out, E, R>,
  input: Input<In, EI, RI>,
  initial: B,
  f: (acc: B, item: Item<Out>) => B,
  options: Options = {}
): Effect.Effect<Handle<{ readonly runId: string; readonly value: B; readonly summary: Summary }, E | EI | BudgetExceeded>, BudgetInvalid, Scope.Scope | Launch | Exclude<R, Run> | RI> =>
  Effect.gen(function*() {
    const budget = yield* Budget.make(options.budget ?? {})
    const runId = options.runId ?? Crypto.randomUUID()
    const launch = yield* Launch
    const engine = yield* Effect.serviceOption(WorkflowEngine.WorkflowEngine)
    const { stream, total } = inputStream(input)
    const events = yield* PubSub.unbounded<RunEvent>({ replay: Number.MAX_SAFE_INTEGER })
    const summary = yield* SummaryCell.make<Summary>({
      runId,
      total,
      read: 0,
      settled: 0,
      done: 0,
      running: 0,
      failed: 0,
      skipped: 0,
      recorded: 0,
      spent: { usd: 0, tokens: 0 },
      budget: Budget.describe(budget.caps),
      startedAtMillis: yield* Clock.currentTimeMillis
    })
    const bases = yield* RcMap.make({ lookup: (key: BaseKey): Effect.Effect<Worker.Workers, StageFailed, Scope.Scope> => key.start, idleTimeToLive: "365 days" })
    const context: RunContext = {
      runId,
      launch,
      budget,
      events,
      summary,
      engine,
      instance: WorkflowEngine.WorkflowInstance.initial(workflow, runId),
      bases,
      closing: yield* FiberSet.make()
    }
    const inputFailure = yield* Ref.make(Option.none<EI>())
    // An input that fails ends its stream here; the run fails with it once the items in flight settle.
    const inputs = keyed(stream, summary.update((s) => ({ ...s, read: s.read + 1 }))).pipe(
      Stream.catchAll((e) => Stream.execute(Ref.set(inputFailure, Option.some(e))))
    )
    const body = Effect.gen(function*() {
      yield* events.publish(new RunStarted({ runId, total, budget: Budget.describe(budget.caps) }))
      const value = yield* pipeline.apply(inputs).pipe(
        Stream.runFoldEffect(initial, (acc, item) =>
          Effect.as(summary.update((s) => ({ ...s, settled: s.settled + item.sources })), f(acc, item)))
      )
      const failure = yield* Ref.get(inputFailure)
      if (Option.isSome(failure)) return yield* Effect.fail(failure.value)
      const end = yield* summary.get
      if (end.skipped > 0) {
        return yield* new BudgetExceeded({ spent: end.spent, done: end.done, pending: pendingOf(end), reason: "exhausted" })
      }
      return { runId, value, summary: end }
    }).pipe(
      // Every session is closed before the run ends, however it ends.
      Effect.ensuring(FiberSet.awaitEmpty(context.closing)),
      Effect.provideService(Run, context),
      Effect.onExit((exit) =>
        Effect.flatMap(summary.get, (s) =>
          events.publish(new RunEnded({ runId, outcome: outcomeOf(exit), spent: s.spent, done: s.done, failed: s.failed, pending: pendingOf(s) })))
      )
    )
    const fiber = yield* Effect.forkScoped(body)
    return {
      runId,
      events: Stream.fromPubSub(events).pipe(Stream.takeUntil((event) => event._tag === "RunEnded")),
      summary,
      await: Fiber.join(fiber)
    }
  })

/** Starts a run that collects the outputs in input order. */
export const start = <In, Out, E, R, EI = never, RI = never>(
  pipeline: Pipeline<In, Out, E, R>,
  input: Input<In, EI, RI>,
  options: Options = {}
): Effect.Effect<Handle<Result<Out>, E | EI | BudgetExceeded>, BudgetInvalid, Scope.Scope | Launch | Exclude<R, Run> | RI> =>
  Effect.map(
    startItems(pipeline, input, Chunk.empty<Item<Out>>(), (acc: Chunk.Chunk<Item<Out>>, item: Item<Out>) => Chunk.append(acc, item), options),
    (handle) => ({
      ...handle,
      await: Effect.map(handle.await, ({ runId, summary, value }) => ({
        runId,
        outputs: Chunk.toReadonlyArray(value).toSorted((a, b) => a.index - b.index).map((item) => item.value),
        summary
      }))
    })
  )

/** Runs a pipeline to its end and collects its outputs in order. */
export const collect = <In, Out, E, R, EI = never, RI = never>(
  pipeline: Pipeline<In, Out, E, R>,
  input: Input<In, EI, RI>,
  options: Options = {}
): Effect.Effect<Result<Out>, E | EI | BudgetExceeded | BudgetInvalid, Launch | Exclude<R, Run> | RI> =>
  Effect.scoped(Effect.flatMap(start(pipeline, input, options), (handle) => handle.await))

/** Runs a pipeline to its end, folding its outputs with `f` in the order they complete. */
export const fold = <In, Out, E, R, B, EI = never, RI = never>(
  pipeline: Pipeline<In, Out, E, R>,
  input: Input<In, EI, RI>,
  initial: B,
  f: (acc: B, value: Out) => B,
  options: Options = {}
): Effect.Effect<{ readonly runId: string; readonly value: B; readonly summary: Summary }, E | EI | BudgetExceeded | BudgetInvalid, Launch | Exclude<R, Run> | RI> =>
  Effect.scoped(Effect.flatMap(startFold(pipeline, input, initial, f, options), (handle) => handle.await))
