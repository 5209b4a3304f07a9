/**
 * Forked workers: a second Claude Code process that starts from its parent's
 * history.
 *
 * A worker runs the CLI with `--resume <parent> --fork-session`, so its first
 * request carries the parent's messages as its prefix and the prompt cache is
 * shared; everything mutable is its own. It is a separate process with its
 * own session state, so it cannot change its parent's permission mode,
 * pending permissions, cost counters or tasks.
 *
 * Every worker is a `local_agent` task of the TaskManager: its output file
 * holds the worker's stream-json events, its result the final text, usage,
 * cost and exit status. Its conversation is recorded to a sidechain of the
 * parent (`<parent>/subagents/agent-<label>-<uuid>.jsonl` + `.meta.json`),
 * never to the parent's main chain; the CLI's own file of the fork is marked
 * as a worker in the SessionIndex, so `list` and `continue` skip it.
 *
 * Workers belong to a `Workers` pool made from the parent session in the
 * parent's scope: the pool holds the per-parent concurrency limit, and
 * closing its scope (the parent being interrupted) kills every worker below
 * it, processes included. Killing a worker never touches the parent.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { ProcessHost, type Task, TaskManager } from "@skein/kernel"
import type { Anthropic } from "@skein/protocol"
import { SessionIndex, TranscriptLayout, TranscriptStore } from "@skein/store"
import { Clock, Context, Deferred, Duration, Effect, Exit, Option, Schema, type Scope, Stream } from "effect"
import { Elicitation } from "./Elicitation.js"
import { Hooks } from "./Hooks.js"
import * as Internal from "./internal/worker.js"
import { Permissions } from "./Permissions.js"
import * as Session from "./Session.js"
import type { RequestError, TurnError } from "./SessionError.js"
import { emptyUsage, type TurnUsage } from "./Turn.js"

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Options and shapes
// ---------------------------------------------------------------------------

interface CommonOptions {
  /** Names the worker; its sidechain is `agent-<label>-<uuid>`. */
  readonly label: string
  /** The worker's one user message. */
  readonly prompt: string | ReadonlyArray<Anthropic.ContentBlock>
  /** The task's description; the label if omitted. */
  readonly description?: string | undefined
  readonly allowedTools?: ReadonlyArray<string> | undefined
  readonly disallowedTools?: ReadonlyArray<string> | undefined
  readonly maxTurns?: number | undefined
  /** The worker's permission mode at start; the parent's launch mode if omitted. */
  readonly permissionMode?: string | undefined
  /** From the moment it holds a slot of the pool; past it the worker fails with `WorkerTimeout`. */
  readonly timeout?: Duration.DurationInput | undefined
}

/** No state shared: its own permission policy, nothing of the parent's handlers. */
export interface IsolatedOptions extends CommonOptions {
  readonly mode?: "isolated" | undefined
  /** The worker's own policy; without one, tool use that needs approval is denied. */
  readonly permissions?: Permissions["Type"] | undefined
}

/** An agent of its own: explicit id, initial messages, tools and model. */
export interface CustomOptions extends CommonOptions {
  readonly mode: "custom"
  /** The sidechain's name (`agent-<agentId>`) instead of `<label>-<uuid>`. */
  readonly agentId: string
  /** User content placed before the prompt in the worker's first message. */
  readonly initialMessages?: ReadonlyArray<string | ReadonlyArray<Anthropic.ContentBlock>> | undefined
  /** The built-in tools it has (`--tools`); changing them from the parent's gives up the shared cache. */
  readonly tools?: ReadonlyArray<string> | undefined
  /** Another model gives up the shared cache as well. */
  readonly model?: string | undefined
  readonly permissions?: Permissions["Type"] | undefined
}

/**
 * Shares the parent's permission handler (and hooks and elicitation) and its
 * abort: `interrupt` on the worker interrupts the parent's turn too.
 */
export interface InteractiveOptions extends CommonOptions {
  readonly mode: "interactive"
}

export type ForkOptions = IsolatedOptions | CustomOptions | InteractiveOptions

export type Mode = NonNullable<ForkOptions["mode"]>

/** What a worker's task returns, and its record keeps as JSON. */
export interface WorkerResult {
  readonly taskId: string
  readonly label: string
  readonly agentId: string
  readonly mode: Mode
  readonly sessionId: string
  readonly parentSessionId: string
  /** The text of the last successful result. */
  readonly text: string | undefined
  readonly usage: TurnUsage
  readonly costUsd: number
  /** The last result's subtype: `success`, `error_max_turns`, … */
  readonly subtype: string | undefined
  readonly isError: boolean
  readonly interrupted: boolean
  readonly stopReason: string | null
  /** How the worker's CLI exited once its turn was done; `null` fields if it had to be stopped. */
  readonly exit: { readonly code: number | null; readonly signal: string | null }
  readonly transcriptPath: string
  readonly sidechainPath: string
}

export interface Worker {
  readonly taskId: Task.TaskId
  readonly label: string
  readonly agentId: string
  readonly mode: Mode
  /** Chosen before the process starts (`--session-id`). */
  readonly sessionId: string
  readonly parentSessionId: string
  /** The CLI's own file of the fork, in the project folder. */
  readonly transcriptPath: string
  readonly sidechainPath: string
  readonly metaPath: string
  /** The worker's session, once it holds a slot and its process runs. */
  readonly session: Effect.Effect<Session.Session, WorkerError>
  /** Waits for the end of the task. */
  readonly result: Effect.Effect<WorkerResult, WorkerError>
  /** Waits for the end of the task. */
  readonly record: Effect.Effect<Task.TaskRecord>
  /** Stops the worker and its process; the parent is not touched. */
  readonly kill: Effect.Effect<Task.TaskRecord>
  /** Interrupts the worker's turn; an interactive worker's abort is the parent's, so its turn is interrupted too. */
  readonly interrupt: Effect.Effect<void, RequestError | WorkerError>
}

export interface WorkerCost {
  readonly taskId: string
  readonly label: string
  readonly status: Task.TaskStatus
  readonly costUsd: number
  readonly usage: TurnUsage
}

/** The parent's cost and its workers', each counted by its own process. */
export interface Costs {
  readonly parentUsd: number
  readonly workersUsd: number
  readonly totalUsd: number
  readonly workers: ReadonlyArray<WorkerCost>
}

/** The workers of one parent session. */
export interface Workers {
  readonly parent: Session.Session
  /** Workers running at once; further forks wait for a slot. */
  readonly concurrency: number
  /** Waits for the parent's session id (its first turn's `system/init`); the worker is killed when the current scope closes. */
  readonly fork: (options: ForkOptions) => Effect.Effect<Worker, ForkError, Scope.Scope>
  /** Every worker forked so far, finished ones included. */
  readonly workers: Effect.Effect<ReadonlyArray<Worker>>
  /** The parent's abort: kills every worker, then interrupts the parent's turn. */
  readonly interrupt: Effect.Effect<void, RequestError>
  readonly costs: Effect.Effect<Costs>
}

export type ForkError = TurnError | TaskManager.TaskStoreError | SidechainMisplaced

export interface PoolOptions {
  /** How the parent was started: workers run the same CLI, environment and flags, so the cache prefix matches. */
  readonly launch: Session.SessionOptions
  /** Default 4. */
  readonly concurrency?: number | undefined
}

export const defaultConcurrency = 4

// ---------------------------------------------------------------------------
// Implementation
// ---------------------------------------------------------------------------

interface Entry {
  readonly worker: Worker
  readonly started: Deferred.Deferred<Session.Session, WorkerError>
}

const failedWith = (taskId: string) => (error: { readonly _tag: string; readonly message: string }): WorkerError =>
  error instanceof WorkerTimeout || error instanceof WorkerKilled || error instanceof WorkerFailed
    ? error
    : new WorkerFailed({ taskId, reason: error._tag, message: error.message })

/**
 * The workers of `parent`, for as long as the current scope: make it in the
 * parent's scope, after `Session.start`, so that closing it kills every
 * worker first. Interactive workers share the Permissions, Hooks and
 * Elicitation services in context here.
 */
export const pool = Effect.fn("Worker.pool")(function*(parent: Session.Session, options: PoolOptions) {
  const tasks = yield* TaskManager.TaskManager
  const store = yield* TranscriptStore.TranscriptStore
  const host = yield* ProcessHost.ProcessHost
  const fs = yield* FileSystem.FileSystem
  const index = yield* Effect.serviceOption(SessionIndex.SessionIndex)
  const shared = {
    permissions: yield* Effect.serviceOption(Permissions),
    hooks: yield* Effect.serviceOption(Hooks),
    elicitation: yield* Effect.serviceOption(Elicitation)
  }
  const concurrency = Math.max(1, options.concurrency ?? defaultConcurrency)
  const slots = yield* Effect.makeSemaphore(concurrency)
  const entries = new Map<string, Entry>()
  const launch = options.launch

  const killAll = Effect.suspend(() =>
    Effect.forEach(Array.from(entries.values()), (entry) => entry.worker.kill, { concurrency: "unbounded", discard: true })
  )

  const poolScope = yield* Effect.scope
  yield* Effect.addFinalizer(() => killAll)

  /** The worker session's services: its own policy, or the parent's handlers for `interactive`; never the parent's TaskManager. */
  const workerContext = (fork: ForkOptions) => {
    let context = Context.make(ProcessHost.ProcessHost, host)
    if (fork.mode === "interactive") {
      if (Option.isSome(shared.permissions)) context = Context.add(context, Permissions, shared.permissions.value)
      if (Option.isSome(shared.hooks)) context = Context.add(context, Hooks, shared.hooks.value)
      if (Option.isSome(shared.elicitation)) context = Context.add(context, Elicitation, shared.elicitation.value)
    } else if (fork.permissions !== undefined) {
      context = Context.add(context, Permissions, fork.permissions)
    }
    return context
  }

  const fork = (fork: ForkOptions) =>
    Effect.gen(function*() {
      const parentSessionId = yield* parent.sessionId
      const parentState = yield* parent.state.get
      const mode: Mode = fork.mode ?? "isolated"
      const agentId = fork.mode === "custom" ? Internal.fileSafe(fork.agentId) : Internal.agentId(fork.label)
      const sessionId = Internal.uuid()
      const cwd = yield* TranscriptLayout.canonicalCwd(launch.cwd).pipe(Effect.provideService(FileSystem.FileSystem, fs))
      const parentPaths = store.layout.session(cwd, parentSessionId)
      if (parentState.transcriptPath !== undefined && parentState.transcriptPath !== parentPaths.transcript) {
        return yield* new SidechainMisplaced({ expected: parentState.transcriptPath, actual: parentPaths.transcript })
      }
      const sidechain = parentPaths.subagent(agentId)
      const transcriptPath = store.layout.session(cwd, sessionId).transcript
      const sessionOptions = Internal.sessionOptions(launch, {
        model: fork.mode === "custom" ? fork.model : undefined,
        tools: fork.mode === "custom" ? fork.tools : undefined,
        permissionMode: fork.permissionMode,
        allowedTools: fork.allowedTools,
        disallowedTools: fork.disallowedTools,
        maxTurns: fork.maxTurns
      }, { parentSessionId, sessionId })
      const content: string | ReadonlyArray<Anthropic.ContentBlock> =
        fork.mode === "custom" && fork.initialMessages !== undefined && fork.initialMessages.length > 0
          ? [...fork.initialMessages, fork.prompt].flatMap((part): ReadonlyArray<Anthropic.ContentBlock> =>
            typeof part === "string" ? [{ type: "text", text: part }] : part
          )
          : fork.prompt
      const started = yield* Deferred.make<Session.Session, WorkerError>()
      const outcome = yield* Deferred.make<WorkerResult, WorkerError>()
      const chain: Internal.ChainContext = { parentSessionId, agentId, cwd }

      const run = (context: TaskManager.TaskContext) =>
        Effect.scoped(Effect.gen(function*() {
          const taskId = context.id
          yield* context.progress({ summary: "waiting for a worker slot" })
          yield* Effect.acquireRelease(slots.take(1), () => slots.release(1))
          const work = Effect.gen(function*() {
            if (Option.isSome(index)) {
              // Losing the mark only lets the fork show up in listings: no reason to fail the worker.
              yield* index.value.markWorker(sessionId, { parentSessionId, label: fork.label }).pipe(
                Effect.catchAll((error) => Effect.logWarning(`could not mark worker session ${sessionId}`, error))
              )
            }
            const now = new Date(yield* Clock.currentTimeMillis).toISOString()
            const writer = yield* store.openSidechain({
              cwd,
              sessionId: parentSessionId,
              agentId,
              meta: {
                agentType: "fork",
                mode,
                label: fork.label,
                description: fork.description ?? fork.label,
                taskId,
                parentSessionId,
                workerSessionId: sessionId,
                workerTranscriptPath: transcriptPath,
                createdAt: now
              }
            })
            const session = yield* Session.start(sessionOptions).pipe(
              // Not the caller's handlers or TaskManager: only what this mode gives the worker.
              Effect.mapInputContext((inherited: Context.Context<Scope.Scope>) =>
                Context.merge(
                  Context.omit(Permissions, Hooks, Elicitation, TaskManager.TaskManager)(inherited),
                  workerContext(fork)
                )
              )
            )
            yield* Deferred.succeed(started, session)
            yield* context.progress({ summary: "running" })
            const promptUuid = Internal.uuid()
            yield* writer.append(Internal.promptEntry(chain, content, { uuid: promptUuid, timestamp: now }))
            let last: string | null = promptUuid
            const turn = yield* session.send(content)
            yield* turn.events.pipe(
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
            const summary = yield* turn.result
            // Its work is done: let the CLI finish its file and exit on its own.
            yield* session.end
            const exit = yield* session.exit.pipe(Effect.timeoutOption(Duration.seconds(5)))
            const final = summary.results.at(-1)
            const result: WorkerResult = {
              taskId,
              label: fork.label,
              agentId,
              mode,
              sessionId,
              parentSessionId,
              text: summary.text,
              usage: summary.usage,
              costUsd: summary.costUsd,
              subtype: final?.subtype,
              isError: summary.isError,
              interrupted: summary.interrupted,
              stopReason: summary.stopReason,
              exit: Option.match(exit, {
                onNone: () => ({ code: null, signal: null }),
                onSome: (status) => ({ code: status.code, signal: status.signal })
              }),
              transcriptPath,
              sidechainPath: sidechain.transcript
            }
            return result
          })
          return yield* fork.timeout === undefined ? work : work.pipe(
            Effect.timeoutFail({
              duration: fork.timeout,
              onTimeout: () =>
                new WorkerTimeout({ taskId, timeoutMillis: Duration.toMillis(Duration.decode(fork.timeout ?? 0)) })
            })
          )
        })).pipe(
          Effect.mapError(failedWith(context.id)),
          Effect.onExit((exit) => {
            const failure: Exit.Exit<WorkerResult, WorkerError> = Exit.isSuccess(exit) || !Exit.isInterrupted(exit)
              ? exit
              : Exit.fail(new WorkerKilled({ taskId: context.id, status: "killed" }))
            const notStarted: Exit.Exit<Session.Session, WorkerError> = Exit.isSuccess(failure)
              ? Exit.fail(
                new WorkerFailed({ taskId: context.id, reason: "NotStarted", message: "the worker ended before its process started" })
              )
              : Exit.failCause(failure.cause)
            return Deferred.done(outcome, failure).pipe(Effect.zipRight(Deferred.done(started, notStarted)))
          })
        )

      const record = yield* tasks.spawn("local_agent", { description: fork.description ?? fork.label }, run)
      const taskId = record.id
      const ended = tasks.await(taskId).pipe(Effect.orDie)
      /** The deferred's outcome, or the task's end if its work never ran. */
      const orEnded = <A>(deferred: Deferred.Deferred<A, WorkerError>) =>
        Effect.raceFirst(
          Deferred.await(deferred),
          ended.pipe(
            Effect.zipRight(Deferred.poll(deferred)),
            Effect.flatMap(Option.match({
              onSome: (value) => value,
              onNone: () => Effect.flatMap(ended, (r) => Effect.fail(new WorkerKilled({ taskId, status: r.status })))
            }))
          )
        )
      const kill = tasks.kill(taskId).pipe(Effect.catchAll(() => ended))
      const worker: Worker = {
        taskId,
        label: fork.label,
        agentId,
        mode,
        sessionId,
        parentSessionId,
        transcriptPath,
        sidechainPath: sidechain.transcript,
        metaPath: sidechain.meta,
        session: orEnded(started),
        result: ended.pipe(Effect.zipRight(orEnded(outcome))),
        record: ended,
        kill,
        interrupt: Effect.gen(function*() {
          const session = yield* orEnded(started)
          yield* session.interrupt
          if (mode === "interactive") yield* parent.interrupt
        })
      }
      entries.set(taskId, { worker, started })
      // In the pool's own scope the pool's finalizer kills it, with all the others at once.
      if ((yield* Effect.scope) !== poolScope) yield* Effect.addFinalizer(() => kill)
      return worker
    }).pipe(Effect.withSpan("Worker.fork", { attributes: { label: fork.label, mode: fork.mode ?? "isolated" } }))

  const costs = Effect.gen(function*() {
    const parentState = yield* parent.state.get
    const workers: Array<WorkerCost> = []
    for (const entry of entries.values()) {
      const status = (yield* Effect.orDie(tasks.get(entry.worker.taskId))).status
      const session = yield* Deferred.poll(entry.started)
      const state = Option.isSome(session)
        ? yield* Effect.option(Effect.flatMap(session.value, (s) => s.state.get))
        : Option.none()
      const counters = Option.map(state, (s) => s.counters)
      workers.push({
        taskId: entry.worker.taskId,
        label: entry.worker.label,
        status,
        costUsd: Option.match(counters, { onNone: () => 0, onSome: (c) => c.costUsd }),
        usage: Option.match(counters, {
          onNone: () => emptyUsage,
          onSome: (c) => ({
            inputTokens: c.inputTokens,
            outputTokens: c.outputTokens,
            cacheReadInputTokens: c.cacheReadInputTokens,
            cacheCreationInputTokens: c.cacheCreationInputTokens
          })
        })
      })
    }
    const workersUsd = workers.reduce((sum, w) => sum + w.costUsd, 0)
    const parentUsd = parentState.counters.costUsd
    return { parentUsd, workersUsd, totalUsd: parentUsd + workersUsd, workers } satisfies Costs
  })

  const workers: Workers = {
    parent,
    concurrency,
    fork,
    workers: Effect.sync(() => Array.from(entries.values(), (entry) => entry.worker)),
    interrupt: killAll.pipe(Effect.zipRight(parent.interrupt)),
    costs
  }
  return workers
})

/** Forks a worker of `parent`: a `local_agent` task, killed when the current scope closes. */
export const fork = (parent: Workers, options: ForkOptions): Effect.Effect<Worker, ForkError, Scope.Scope> =>
  parent.fork(options)
