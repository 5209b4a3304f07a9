/**
 * One item through one stage: an activity of the run's workflow, so a
 * durable engine records its output as it completes and a run started again
 * under the same id gets it back without a session. Inside the activity:
 * the budget's admission check, then attempts (each a fresh session or a
 * forked worker, bounded by the stage's timeout) under its retry schedule.
 */
import * as Activity from "@effect/workflow/Activity"
import { WorkflowEngine, WorkflowInstance } from "@effect/workflow/WorkflowEngine"
import * as FileSystem from "@effect/platform/FileSystem"
import { ProcessHost, TaskManager } from "@skein/kernel"
import { Session, type SessionError, Turn, Worker } from "@skein/session"
import { TranscriptStore } from "@skein/store"
import { Cause, Context, Effect, Either, Exit, FiberSet, Option, ParseResult, RcMap, Ref, Schedule, Schema, Scope } from "effect"
import { BudgetExceeded, StageFailed } from "../PipelineError.js"
import { CostCounted, ItemDone, ItemFailed, ItemRetried, ItemSkipped, ItemStarted } from "../RunEvent.js"
import type * as Stage from "../Stage.js"
import type { Item } from "./item.js"
import { BaseKey, progressOf, Run, type RunContext } from "./runContext.js"

/**
 * The events of an item are built from values the types already vouch for:
 * their constructors skip the schema check (some tens of µs per item).
 */
const trusted = { disableValidation: true } as const

const failed = (stage: string, key: string, cause: StageFailed["cause"], detail: string) =>
  new StageFailed({ stage, key, cause, detail })

const turnFailed = (stage: string, key: string) => (error: { readonly _tag: string; readonly message: string }) =>
  Effect.fail(failed(stage, key, error._tag === "CliExited" ? "CliFailed" : "TurnFailed", `${error._tag}: ${error.message}`))

/**
 * A session or worker that could not start or ended early becomes the item's
 * `StageFailed`, which a retry may fix; the budget's error passes as it is.
 */
const asStageFailed = (stage: string, key: string) =>
(
  error: StageFailed | BudgetExceeded | { readonly _tag: string; readonly message: string }
): Effect.Effect<never, StageFailed | BudgetExceeded> =>
  error instanceof StageFailed || error instanceof BudgetExceeded ? Effect.fail(error) : turnFailed(stage, key)(error)

/** Counts a turn's bill; whether it crossed a cap is checked once the item's result is recorded. */
const charge = (run: RunContext, stage: string, key: string, usd: number, usage: Turn.TurnUsage) =>
  Effect.gen(function*() {
    const tokens = usage.inputTokens + usage.outputTokens + usage.cacheReadInputTokens + usage.cacheCreationInputTokens
    const spent = yield* run.budget.charge({ usd, tokens })
    yield* run.summary.update((s) => ({ ...s, spent }))
    yield* run.events.publish(new CostCounted({ stage, key, usd, tokens, spent }, trusted))
  })

/** A text stage's output: the turn's final text, which must be there. */
const decodeText = <In, Out>(stage: Stage.Stage<In, Out, any>, key: string, text: string | undefined) =>
  Schema.decodeUnknown(stage.outputSchema)(text).pipe(
    Effect.mapError(() => failed(stage.name, key, "TurnFailed", "the turn ended without a text answer"))
  )

/**
 * Closes an attempt's session. After a success its close (the CLI's exit,
 * some tens of ms) is off the item's path: the next item starts meanwhile,
 * and the run awaits every close before it ends (`RunContext.closing`).
 * After a failure or an interrupt it closes at once, so a crossed budget or
 * a timeout returns only once its sessions are gone.
 */
const closeSession = (run: RunContext) => (scope: Scope.CloseableScope, exit: Exit.Exit<unknown, unknown>) =>
  Exit.isSuccess(exit)
    ? Effect.asVoid(FiberSet.run(run.closing, Effect.uninterruptible(Scope.close(scope, exit))))
    : Scope.close(scope, exit)

/** One attempt in a fresh session. */
const freshAttempt = <In, Out>(run: RunContext, stage: Stage.Stage<In, Out, any>, item: Item<In>) =>
  Effect.acquireUseRelease(
    Scope.make(),
    (scope) =>
      Effect.gen(function*() {
        const session = yield* Session.start({ ...run.launch, ...stage.session, ...(stage.structured ? { outputSchema: stage.outputSchema } : {}) })
        const summary = yield* Effect.flatMap(session.send(stage.prompt(item.value)), (turn) => turn.result)
        yield* charge(run, stage.name, item.key, summary.costUsd, summary.usage)
        if (!stage.structured) return yield* decodeText(stage, item.key, summary.text)
        return yield* Turn.structuredOutput(stage.outputSchema)(summary).pipe(
          Effect.mapError((e) => failed(stage.name, item.key, "StructuredOutputInvalid", e.issue))
        )
      }).pipe(Scope.extend(scope)),
    closeSession(run)
  ).pipe(Effect.catchAll(asStageFailed(stage.name, item.key)))

/**
 * The base of a forked stage: a session told `fork.base` once, and its pool
 * of workers, which live as long as the run. Workers carry the stage's
 * output schema; the base does not, so its own turn is plain text.
 */
const startBase = (run: RunContext, stage: Stage.Any, concurrency: number) =>
  Effect.gen(function*() {
    const fork = stage.fork!
    const launch: Session.SessionOptions = { ...run.launch, ...stage.session }
    const base = yield* Session.start(launch)
    const summary = yield* Effect.flatMap(base.send(fork.base), (turn) => turn.result)
    yield* charge(run, stage.name, "base", summary.costUsd, summary.usage)
    const workers = { ...launch, ...(stage.structured ? { outputSchema: stage.outputSchema } : {}) }
    return yield* Worker.pool(base, { launch: workers, concurrency: fork.concurrency ?? concurrency })
  }).pipe(Effect.catchAll(asStageFailed(stage.name, "base")))

/** One attempt as a forked worker of the stage's base; its structured output comes back as the result's text (JSON). */
const forkedAttempt = <In, Out>(run: RunContext, stage: Stage.Stage<In, Out, any>, item: Item<In>, concurrency: number) =>
  Effect.gen(function*() {
    const tasks = yield* Effect.serviceOption(TaskManager.TaskManager)
    const store = yield* Effect.serviceOption(TranscriptStore.TranscriptStore)
    if (Option.isNone(tasks) || Option.isNone(store)) {
      return yield* Effect.dieMessage(`stage ${stage.name} is forked: a run of it needs TaskManager and TranscriptStore in context`)
    }
    // Only these services: the caller's Scope must not replace the RcMap's, which the base lives in.
    const context = Context.pick(ProcessHost.ProcessHost, FileSystem.FileSystem)(yield* Effect.context<Requirements>())
    const start = startBase(run, stage, concurrency).pipe(
      // The base's turn is counted like any other; whether the budget is crossed is checked after each item.
      Effect.catchTag("BudgetExceeded", (e) => Effect.die(e)),
      Effect.provide(context),
      Effect.provideService(TaskManager.TaskManager, tasks.value),
      Effect.provideService(TranscriptStore.TranscriptStore, store.value)
    )
    const workers = yield* RcMap.get(run.bases, new BaseKey(stage.name, start))
    const worker = yield* Worker.fork(workers, { label: stage.name, prompt: stage.prompt(item.value) })
    const result = yield* worker.result
    yield* charge(run, stage.name, item.key, result.costUsd, result.usage)
    if (!stage.structured) return yield* decodeText(stage, item.key, result.text)
    return yield* Schema.decodeUnknown(Schema.parseJson(stage.outputSchema))(result.text ?? "").pipe(
      Effect.mapError((e) => failed(stage.name, item.key, "StructuredOutputInvalid", ParseResult.TreeFormatter.formatErrorSync(e)))
    )
  }).pipe(
    Effect.scoped,
    Effect.catchAll(asStageFailed(stage.name, item.key))
  )

/** Attempts under the stage's timeout and retry schedule, each reported. */
const attempts = <In, Out>(run: RunContext, stage: Stage.Stage<In, Out, any>, item: Item<In>, concurrency: number) =>
  Effect.gen(function*() {
    const attempt = yield* Ref.make(0)
    const lastFailure = yield* Ref.make("")
    const one = Effect.gen(function*() {
      const n = yield* Ref.updateAndGet(attempt, (a) => a + 1)
      const where = { stage: stage.name, key: item.key, index: item.index }
      if (n > 1) yield* run.events.publish(new ItemRetried({ ...where, attempt: n, reason: yield* Ref.get(lastFailure) }, trusted))
      yield* run.events.publish(new ItemStarted({ ...where, attempt: n }, trusted))
      const body = stage.fork === undefined ? freshAttempt(run, stage, item) : forkedAttempt(run, stage, item, concurrency)
      const bounded = stage.timeout === undefined ? body : body.pipe(
        Effect.timeoutFail({ duration: stage.timeout, onTimeout: () => failed(stage.name, item.key, "Timeout", `no output within ${stage.timeout}`) })
      )
      return yield* Effect.acquireUseRelease(
        run.summary.update((s) => ({ ...s, running: s.running + 1 })),
        () => bounded,
        () => run.summary.update((s) => ({ ...s, running: s.running - 1 }))
      ).pipe(Effect.tapError((e) => e._tag === "StageFailed" ? Ref.set(lastFailure, e.message) : Effect.void))
    })
    if (stage.retry === undefined) return yield* one
    // A crossed budget is not the stage's failure: it leaves the schedule's sight, and the run.
    const retried = one.pipe(
      Effect.map((out): Either.Either<Out, BudgetExceeded> => Either.right(out)),
      Effect.catchTag("BudgetExceeded", (e) => Effect.succeed<Either.Either<Out, BudgetExceeded>>(Either.left(e))),
      Effect.retry(stage.retry)
    )
    return yield* Effect.flatMap(retried, (either) => either)
  })

/** Built once: an activity's schemas are built anew for each item. */
const ActivityError = Schema.Union(StageFailed, BudgetExceeded)

/**
 * The activity of one item through one stage. `ran` tells whether a call ran
 * its body or the engine answered from what an earlier run recorded;
 * `earlier` holds the recorded failure a call goes past, reported as a retry.
 */
const activityOf = <In, Out, R>(
  context: RunContext,
  stage: Stage.Stage<In, Out, R>,
  item: Item<In>,
  concurrency: number,
  ran: Ref.Ref<boolean>,
  earlier: Ref.Ref<Option.Option<StageFailed>>
) =>
  Activity.make({
    name: `${stage.name}/${item.key}`,
    success: stage.outputSchema,
    error: ActivityError,
    interruptRetryPolicy: Schedule.stop,
    execute: Effect.gen(function*() {
      yield* Ref.set(ran, true)
      const failure = yield* Ref.get(earlier)
      if (Option.isSome(failure)) {
        const where = { stage: stage.name, key: item.key, index: item.index }
        yield* context.events.publish(new ItemRetried({ ...where, attempt: 1, reason: `failed in an earlier run: ${failure.value.message}` }, trusted))
      }
      return yield* attempts(context, stage, item, concurrency)
    })
  })

/**
 * Calls the activity under attempt numbers from 1. A durable engine answers
 * an attempt an earlier run finished from its record; when that record is a
 * failure (the item's `StageFailed` after its retries, or a defect) the call
 * goes on to the next attempt number, and the first one no run has recorded
 * runs the item again: a resumed run retries what failed.
 */
const call = <Out, R>(
  once: (attempt: number) => Effect.Effect<Exit.Exit<Out, StageFailed | BudgetExceeded>, never, R>,
  ran: Ref.Ref<boolean>,
  earlier: Ref.Ref<Option.Option<StageFailed>>
) => {
  const attempt = (n: number): Effect.Effect<{ readonly exit: Exit.Exit<Out, StageFailed | BudgetExceeded>; readonly recorded: boolean }, never, R> =>
    Effect.gen(function*() {
      yield* Ref.set(ran, false)
      const exit = yield* once(n)
      const recorded = !(yield* Ref.get(ran))
      if (!recorded || Exit.isSuccess(exit) || Exit.isInterrupted(exit)) return { exit, recorded }
      const failure = Option.filter(Cause.failureOption(exit.cause), (e): e is StageFailed => e._tag === "StageFailed")
      if (Option.isSome(failure)) yield* Ref.set(earlier, failure)
      return yield* attempt(n + 1)
    })
  return attempt(1)
}

/**
 * The item's output through the stage, or none when it failed (and the stage
 * is not failFast) or did not start for the budget. `BudgetExceeded` from a
 * crossed cap, and a failFast stage's failure, end the run.
 *
 * The budget's admission check comes before the activity, so a refusal is
 * never recorded as the item's end.
 */
export const run = <In, Out, R>(stage: Stage.Stage<In, Out, R>, item: Item<In>, concurrency: number) =>
  Effect.gen(function*() {
    const context = yield* Run
    if (!(yield* context.budget.admits)) {
      const { done, pending } = yield* progressOf(context)
      const refused = new BudgetExceeded({ spent: yield* context.budget.spent, done, pending, reason: "exhausted" })
      return yield* yield* settle(context, stage, item, Either.left(refused), false)
    }
    // Without a durable engine an activity would only be bookkeeping (some ms of it per item): the attempts run as they are.
    const ended = yield* Option.match(context.engine, {
      onNone: () => Effect.map(Effect.exit(attempts(context, stage, item, concurrency)), (exit) => ({ exit, recorded: false })),
      onSome: (engine) =>
        Effect.gen(function*() {
          const ran = yield* Ref.make(false)
          const earlier = yield* Ref.make(Option.none<StageFailed>())
          const activity = activityOf(context, stage, item, concurrency, ran, earlier)
          return yield* call((attempt) =>
            activity.pipe(
              Effect.provideService(Activity.CurrentAttempt, attempt),
              Effect.provideService(WorkflowEngine, engine),
              Effect.provideService(WorkflowInstance, context.instance),
              Effect.exit
            ), ran, earlier)
        })
    })
    const outcome = yield* Effect.either(ended.exit)
    const output = yield* settle(context, stage, item, outcome, ended.recorded)
    // The item's turn is counted and its result recorded: now a crossed cap ends the run.
    yield* context.budget.check(progressOf(context))
    return yield* output
  })

/** Counts and reports how the item's activity ended; what is left to fail is the run's to fail with. */
const settle = <In, Out, R>(
  context: RunContext,
  stage: Stage.Stage<In, Out, R>,
  item: Item<In>,
  outcome: Either.Either<Out, StageFailed | BudgetExceeded>,
  recorded: boolean
) =>
  Effect.gen(function*() {
    const where = { stage: stage.name, key: item.key, index: item.index }
    if (outcome._tag === "Right") {
      yield* context.summary.update((s) => ({ ...s, done: s.done + 1, recorded: s.recorded + (recorded ? 1 : 0) }))
      yield* context.events.publish(new ItemDone({ ...where, recorded }, trusted))
      return Effect.succeed(Option.some(outcome.right))
    }
    const error = outcome.left
    if (error._tag === "BudgetExceeded" && error.reason === "exhausted") {
      yield* context.summary.update((s) => ({ ...s, skipped: s.skipped + 1 }))
      yield* context.events.publish(new ItemSkipped(where, trusted))
      return Effect.succeed(Option.none<Out>())
    }
    if (error._tag === "StageFailed") {
      yield* context.summary.update((s) => ({ ...s, failed: s.failed + 1 }))
      yield* context.events.publish(new ItemFailed({ ...where, reason: error.message }, trusted))
      if (!stage.failFast) return Effect.succeed(Option.none<Out>())
    }
    return Effect.fail(error)
  })

export type { SessionError }

/** What running any stage needs in context: the process host its sessions spawn through, and the run's launch. */
export type Requirements = ProcessHost.ProcessHost | FileSystem.FileSystem
