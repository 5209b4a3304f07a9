/**
 * What a worker's task does: wait for a slot of the pool, start the forked
 * CLI, run its one turn while recording it to the task's output file and to
 * the sidechain, and let the CLI exit. Everything it acquires (the slot, the
 * sidechain writer, the process) lives in the task fiber's scope, so a kill
 * releases it all.
 */
import { type ProcessHost, TaskManager } from "@skein/kernel"
import type { SessionIndex, TranscriptStore } from "@skein/store"
import { Clock, Context, Deferred, Duration, Effect, Exit, Option, type Scope, Stream } from "effect"
import { Elicitation } from "../Elicitation.js"
import { Hooks } from "../Hooks.js"
import { Permissions } from "../Permissions.js"
import * as Session from "../Session.js"
import { Toolkits } from "../Toolkit.js"
import type { Turn, TurnSummary } from "../Turn.js"
import type { WorkerResult } from "../Worker.js"
import type { ForkPlan } from "./forkLaunch.js"
import * as Internal from "./worker.js"
import { failedWith, WorkerFailed, WorkerKilled, type WorkerError, WorkerTimeout } from "./workerError.js"

export interface RunOptions {
  readonly plan: ForkPlan
  readonly slots: Effect.Semaphore
  readonly store: TranscriptStore.TranscriptStore["Type"]
  readonly index: Option.Option<SessionIndex.SessionIndex["Type"]>
  /** The services the worker's session gets (see `forkLaunch.services`). */
  readonly services: Context.Context<ProcessHost.ProcessHost>
  /** Resolved with the session once its process runs; failed if the task ends first. */
  readonly started: Deferred.Deferred<Session.Session, WorkerError>
  /** The task's outcome, as the worker's `result` reports it. */
  readonly outcome: Deferred.Deferred<WorkerResult, WorkerError>
}

/** How long a worker whose turn is done may take to exit on its own before its process is stopped. */
export const exitWait = Duration.seconds(5)

/** The task's result from its turn's summary and how its CLI exited. */
export const resultOf = (
  plan: ForkPlan,
  taskId: string,
  summary: TurnSummary,
  exit: Option.Option<ProcessHost.ExitStatus>
): WorkerResult => ({
  taskId,
  label: plan.label,
  agentId: plan.agentId,
  mode: plan.mode,
  sessionId: plan.sessionId,
  parentSessionId: plan.parentSessionId,
  text: summary.text,
  usage: summary.usage,
  costUsd: summary.costUsd,
  subtype: summary.results.at(-1)?.subtype,
  isError: summary.isError,
  ...(summary.failure === undefined ? {} : { failure: { reason: summary.failure.reason, text: summary.failure.text } }),
  interrupted: summary.interrupted,
  stopReason: summary.stopReason,
  exit: Option.match(exit, {
    onNone: () => ({ code: null, signal: null }),
    onSome: (status) => ({ code: status.code, signal: status.signal })
  }),
  transcriptPath: plan.transcriptPath,
  sidechainPath: plan.sidechain.transcript
})

/** Every event to the output file; conversation messages also to the sidechain, chained after the prompt. */
const record = (
  turn: Turn,
  context: TaskManager.TaskContext,
  writer: TranscriptStore.Writer,
  chain: Internal.ChainContext,
  promptUuid: string
) =>
  Effect.suspend(() => {
    let last: string | null = promptUuid
    return turn.events.pipe(
      Stream.runForEach((event) =>
        Effect.gen(function*() {
          yield* context.heartbeat
          yield* context.append(Internal.outputLine(event))
          if (event._tag !== "Message") return
          const timestamp = new Date(yield* Clock.currentTimeMillis).toISOString()
          const entry = Internal.chainEntry(chain, event.message, { parentUuid: last, timestamp })
          if (entry === undefined) return
          yield* writer.append(entry)
          last = entry.uuid
        })
      )
    )
  })

/** The worker's life once it holds a slot. */
const converse = (options: RunOptions, context: TaskManager.TaskContext) =>
  Effect.gen(function*() {
    const { plan, store } = options
    if (Option.isSome(options.index)) {
      // Losing the mark only lets the fork show up in listings: no reason to fail the worker.
      yield* options.index.value.markWorker(plan.sessionId, { parentSessionId: plan.parentSessionId, label: plan.label }).pipe(
        Effect.catchAll((error) => Effect.logWarning(`could not mark worker session ${plan.sessionId}`, error))
      )
    }
    const now = new Date(yield* Clock.currentTimeMillis).toISOString()
    const writer = yield* store.openSidechain({
      cwd: plan.cwd,
      sessionId: plan.parentSessionId,
      agentId: plan.agentId,
      meta: {
        agentType: "fork",
        mode: plan.mode,
        label: plan.label,
        description: plan.description,
        taskId: context.id,
        parentSessionId: plan.parentSessionId,
        workerSessionId: plan.sessionId,
        workerTranscriptPath: plan.transcriptPath,
        createdAt: now
      }
    })
    const session = yield* Session.start(plan.sessionOptions).pipe(
      // Not the caller's handlers, toolkits or TaskManager: only what this mode gives the worker.
      Effect.mapInputContext((inherited: Context.Context<Scope.Scope>) =>
        Context.merge(Context.omit(Permissions, Hooks, Elicitation, Toolkits, TaskManager.TaskManager)(inherited), options.services)
      )
    )
    yield* Deferred.succeed(options.started, session)
    yield* context.progress({ summary: "running" })
    const promptUuid = Internal.uuid()
    yield* writer.append(Internal.promptEntry(plan.chain, plan.content, { uuid: promptUuid, timestamp: now }))
    const turn = yield* session.send(plan.content)
    yield* record(turn, context, writer, plan.chain, promptUuid)
    const summary = yield* turn.result
    // Its work is done: let the CLI finish its file and exit on its own.
    yield* session.end
    const exit = yield* session.exit.pipe(Effect.timeoutOption(exitWait))
    return resultOf(plan, context.id, summary, exit)
  })

/** Settles `started` and `outcome` from the task's exit; an interruption is a kill. */
const report = (options: RunOptions, taskId: string) => (exit: Exit.Exit<WorkerResult, WorkerError>) => {
  const failure: Exit.Exit<WorkerResult, WorkerError> = Exit.isSuccess(exit) || !Exit.isInterrupted(exit)
    ? exit
    : Exit.fail(new WorkerKilled({ taskId, status: "killed" }))
  const notStarted: Exit.Exit<Session.Session, WorkerError> = Exit.isSuccess(failure)
    ? Exit.fail(new WorkerFailed({ taskId, reason: "NotStarted", message: "the worker ended before its process started" }))
    : Exit.failCause(failure.cause)
  return Deferred.done(options.outcome, failure).pipe(Effect.zipRight(Deferred.done(options.started, notStarted)))
}

/** The task's effect: `timeout` counts from the moment it holds a slot. */
export const run = (options: RunOptions) => (context: TaskManager.TaskContext): Effect.Effect<WorkerResult, WorkerError> =>
  Effect.scoped(Effect.gen(function*() {
    yield* context.progress({ summary: "waiting for a worker slot" })
    yield* Effect.acquireRelease(options.slots.take(1), () => options.slots.release(1))
    const work = converse(options, context)
    const timeout = options.plan.timeout
    if (timeout === undefined) return yield* work
    return yield* work.pipe(Effect.timeoutFail({
      duration: timeout,
      onTimeout: () => new WorkerTimeout({ taskId: context.id, timeoutMillis: Duration.toMillis(Duration.decode(timeout)) })
    }))
  })).pipe(
    Effect.mapError(failedWith(context.id)),
    Effect.onExit(report(options, context.id))
  )
