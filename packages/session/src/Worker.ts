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
import { SessionIndex, TranscriptStore } from "@skein/store"
import { Deferred, type Duration, Effect, type Scope } from "effect"
import { Elicitation } from "./Elicitation.js"
import { Hooks } from "./Hooks.js"
import * as ForkLaunch from "./internal/forkLaunch.js"
import type { SidechainMisplaced, WorkerError } from "./internal/workerError.js"
import * as WorkerHandle from "./internal/workerHandle.js"
import * as WorkerPool from "./internal/workerPool.js"
import * as WorkerRun from "./internal/workerRun.js"
import * as WorkerTeardown from "./internal/workerTeardown.js"
import { Permissions } from "./Permissions.js"
import { Toolkits } from "./Toolkit.js"
import type * as Session from "./Session.js"
import { type RequestError, type TurnError, TurnFailed } from "./SessionError.js"
import type { TurnUsage } from "./Turn.js"

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

export { SidechainMisplaced, WorkerFailed, WorkerKilled, WorkerTimeout } from "./internal/workerError.js"
export type { WorkerError } from "./internal/workerError.js"

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
  /** `inherit` (default): the worker serves the parent's toolkits (those in context at `pool`); `none`: no host tools. */
  readonly toolkits?: "inherit" | "none" | undefined
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
  /** With `isError`: why, in the CLI's words (`Not logged in · Please run /login`); see `Turn.TurnSummary.failure`. */
  readonly failure?: { readonly reason: string; readonly text: string } | undefined
  readonly interrupted: boolean
  readonly stopReason: string | null
  /** How the worker's CLI exited once its turn was done; `null` fields if it had to be stopped. */
  readonly exit: { readonly code: number | null; readonly signal: string | null }
  readonly transcriptPath: string
  readonly sidechainPath: string
}

/**
 * The worker's result, or `TurnFailed` when its turn failed (the CLI could
 * not reach a model, say): for a job that needs the worker's answer.
 */
export const succeeded = (result: WorkerResult): Effect.Effect<WorkerResult, TurnFailed> =>
  result.isError
    ? Effect.fail(new TurnFailed(result.failure ?? { reason: result.subtype ?? "error", text: `the worker's turn ended with ${result.subtype ?? "an error"}` }))
    : Effect.succeed(result)

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

/**
 * The workers of `parent`, for as long as the current scope: make it in the
 * parent's scope, after `Session.start`, so that closing it kills every
 * worker first. Interactive workers share the Permissions, Hooks and
 * Elicitation services in context here; every worker serves the Toolkits
 * in context here, unless its options say `toolkits: "none"`.
 *
 * The parts live in `internal/`: a fork's launch (`forkLaunch`), its task's
 * work (`workerRun`), the handle its caller gets (`workerHandle`), the
 * bounded kill (`workerTeardown`) and the pool's bookkeeping (`workerPool`).
 */
export const pool = Effect.fn("Worker.pool")(function*(parent: Session.Session, options: PoolOptions) {
  const tasks = yield* TaskManager.TaskManager
  const store = yield* TranscriptStore.TranscriptStore
  const host = yield* ProcessHost.ProcessHost
  const fs = yield* FileSystem.FileSystem
  const index = yield* Effect.serviceOption(SessionIndex.SessionIndex)
  const shared: ForkLaunch.SharedHandlers = {
    permissions: yield* Effect.serviceOption(Permissions),
    hooks: yield* Effect.serviceOption(Hooks),
    elicitation: yield* Effect.serviceOption(Elicitation),
    toolkits: yield* Effect.serviceOption(Toolkits)
  }
  const concurrency = Math.max(1, options.concurrency ?? defaultConcurrency)
  const slots = yield* Effect.makeSemaphore(concurrency)
  const entries = new Map<string, WorkerPool.Entry>()
  const launch = options.launch
  const stopBound = WorkerTeardown.stopBound(launch.stopTimeouts)

  const poolScope = yield* Effect.scope
  yield* Effect.addFinalizer(() => WorkerPool.killAll(entries))

  const fork = (fork: ForkOptions) =>
    Effect.gen(function*() {
      const plan = yield* ForkLaunch.plan(parent, launch, fork).pipe(
        Effect.provideService(TranscriptStore.TranscriptStore, store),
        Effect.provideService(FileSystem.FileSystem, fs)
      )
      const started = yield* Deferred.make<Session.Session, WorkerError>()
      const outcome = yield* Deferred.make<WorkerResult, WorkerError>()
      // The worker's session spawns through this host, so a stuck kill can still reach its process.
      const hold = yield* WorkerTeardown.makeHold
      const services = ForkLaunch.services(fork, WorkerTeardown.holding(host, hold), shared)
      const run = WorkerRun.run({ plan, slots, store, index, services, started, outcome })
      const record = yield* tasks.spawn("local_agent", { description: plan.description }, run)
      const worker = WorkerHandle.make({ plan, taskId: record.id, tasks, parent, started, outcome, hold, stopBound })
      entries.set(record.id, { worker, started })
      // In the pool's own scope the pool's finalizer kills it, with all the others at once.
      if ((yield* Effect.scope) !== poolScope) yield* Effect.addFinalizer(() => worker.kill)
      return worker
    }).pipe(Effect.withSpan("Worker.fork", { attributes: { label: fork.label, mode: fork.mode ?? "isolated" } }))

  const workers: Workers = {
    parent,
    concurrency,
    fork,
    workers: Effect.sync(() => Array.from(entries.values(), (entry) => entry.worker)),
    interrupt: WorkerPool.killAll(entries).pipe(Effect.zipRight(parent.interrupt)),
    costs: WorkerPool.costs(parent, entries, tasks)
  }
  return workers
})

/** Forks a worker of `parent`: a `local_agent` task, killed when the current scope closes. */
export const fork = (parent: Workers, options: ForkOptions): Effect.Effect<Worker, ForkError, Scope.Scope> =>
  parent.fork(options)
