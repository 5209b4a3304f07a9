/**
 * autoDream: a periodic consolidation of a project's memory folder across
 * sessions, as a `dream` task (id prefix `d`) of the TaskManager.
 *
 * After a turn the time and activity gates run outside any task (most turns
 * stop at the first, one `stat`). When both pass, a dream task starts and
 * takes the lock gate in its own scope, so killing the task, or any failure,
 * closes that scope and the kernel's `FileLock` rolls back: the previous
 * mtime is restored, or the lock is deleted if there was none. A worker
 * whose turn failed (`TurnFailed`: no login, an API error) fails the task
 * the same way. Only a run that finished and whose index was checked commits, and its commit stamps
 * the new "last consolidation".
 *
 * The worker is a fully isolated fork under `MemoryPolicy.memoryWorker`:
 * read-only shell, read tools, Edit/Write only inside the memory folder. It
 * cannot delete, so a memory it empties is removed by skein afterwards, and
 * the index is then checked and repaired (150 characters a line, 25 KB).
 *
 * @since 0.0.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import { type FileLock, Gate, type Task, TaskManager } from "@skein/kernel"
import { type Session, Worker } from "@skein/session"
import { SessionIndex, TranscriptLayout } from "@skein/store"
import { Effect, Option, type Scope } from "effect"
import * as NodePath from "node:path"
import * as DreamGates from "./DreamGates.js"
import * as FolderDiff from "./internal/folderDiff.js"
import * as Prompts from "./internal/prompts.js"
import * as MemoryEvents from "./MemoryEvents.js"
import * as MemoryFolder from "./MemoryFolder.js"
import * as MemoryPolicy from "./MemoryPolicy.js"

/**
 * @since 0.0.0
 */
export interface Config extends DreamGates.Config {
  readonly enabled: boolean
  /** The worker's turns. Default 30. */
  readonly maxTurns: number
  readonly limits: MemoryFolder.Limits
}

/**
 * @since 0.0.0
 */
export const defaultConfig: Config = {
  ...DreamGates.defaultConfig,
  enabled: true,
  maxTurns: 30,
  limits: MemoryFolder.defaultLimits
}

/**
 * @since 0.0.0
 */
export interface Options {
  /** The worker pool of the session whose turns trigger the dream. */
  readonly workers: Worker.Workers
  readonly launch: Session.SessionOptions
  readonly config?: Partial<Config> | undefined
}

/**
 * What a dream task returns.
 *
 * @since 0.0.0
 */
export type Report =
  | { readonly _tag: "Skipped"; readonly gate: string; readonly reason: string }
  | {
    readonly _tag: "Consolidated"
    readonly workerTaskId: string
    readonly files: ReadonlyArray<string>
    readonly removed: ReadonlyArray<string>
    readonly remaining: ReadonlyArray<MemoryFolder.Problem>
  }

/**
 * @since 0.0.0
 */
export interface Dream {
  readonly memoryDir: string
  readonly gates: DreamGates.DreamGates
  /** After a turn: the time and activity gates; a dream task when both pass. */
  readonly afterTurn: Effect.Effect<Option.Option<Task.TaskRecord>, DreamGates.Error | TaskManager.TaskStoreError>
  /** By hand (`Dream.run(project)`): a dream task now, past the time and activity gates; it still takes the lock. */
  readonly run: Effect.Effect<Task.TaskRecord, TaskManager.TaskStoreError>
}

const configRootOf = (launch: Session.SessionOptions): string =>
  launch.configDir ?? process.env["CLAUDE_CONFIG_DIR"] ?? `${process.env["HOME"] ?? ""}/.claude`

/** Memory files the worker emptied: its way of deleting, since it has no `rm`. */
const removeEmptied = (memoryDir: string, contents: FolderDiff.Contents) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) =>
    Effect.forEach(
      [...contents].filter(([name, text]) => name !== MemoryFolder.indexName && text.trim() === ""),
      ([name]) => fs.remove(NodePath.join(memoryDir, name)).pipe(Effect.ignore),
      { discard: true }
    ))

/**
 * @since 0.0.0
 */
export const make = Effect.fn("Dream.make")(function*(options: Options) {
  const config: Config = { ...defaultConfig, ...options.config }
  const tasks = yield* TaskManager.TaskManager
  const fs = yield* FileSystem.FileSystem
  const context = yield* Effect.context<Path.Path>()
  const parent = options.workers.parent
  const root = configRootOf(options.launch)
  const cwd = yield* TranscriptLayout.canonicalCwd(options.launch.cwd)
  const projectDir = TranscriptLayout.projectDir(root, cwd)
  const memoryDir = MemoryFolder.directory(root, cwd)
  // The session's id arrives with its first turn; until then it is not known, and nothing waits for it.
  let current: string | undefined
  const learnId = Effect.map(parent.state.get, (state) => {
    current = state.sessionId
  })
  const gates = yield* DreamGates.make({
    memoryDir,
    projectDir,
    currentSessionId: () => current,
    sessions: Option.getOrUndefined(yield* Effect.serviceOption(SessionIndex.SessionIndex)),
    config
  })

  /** The task's work: the lock in the task's scope, the worker, the check, the commit. */
  const consolidate = (lockGate: Gate.Gate<FileLock.FileLock, FileLock.FileLockError, FileSystem.FileSystem | Scope.Scope>, taskId: string) =>
    Effect.scoped(Effect.gen(function*() {
      yield* learnId
      const id = current ?? ""
      const decision = yield* lockGate.check
      if (decision._tag === "Stop") {
        yield* MemoryEvents.emit({ _tag: "Skipped", job: "dream", sessionId: id, gate: lockGate.name, reason: decision.reason })
        const skipped: Report = { _tag: "Skipped", gate: lockGate.name, reason: decision.reason }
        return skipped
      }
      const lock = decision.value
      yield* MemoryEvents.emit({ _tag: "Started", job: "dream", sessionId: id, taskId })
      const before = yield* FolderDiff.contents(memoryDir)
      const index = (before.get(MemoryFolder.indexName) ?? "").trimEnd()
      const worker = yield* options.workers.fork({
        mode: "isolated",
        label: "dream",
        description: "memory consolidation",
        prompt: Prompts.dream({ memoryDir, projectDir, index, limits: config.limits }),
        maxTurns: config.maxTurns,
        permissions: MemoryPolicy.memoryWorker(memoryDir)
      })
      // A worker whose turn failed (no model, an API error) fails the dream: its scope rolls the lock back.
      const result = yield* Effect.flatMap(worker.result, Worker.succeeded)
      yield* removeEmptied(memoryDir, yield* FolderDiff.contents(memoryDir))
      const repair = yield* MemoryFolder.repair(memoryDir, config.limits)
      const changes = FolderDiff.diff(before, yield* FolderDiff.contents(memoryDir))
      yield* lock.commit
      yield* MemoryEvents.emit({ _tag: "Wrote", job: "dream", sessionId: id, files: changes.written, removed: changes.removed, repaired: repair.fixed, remaining: repair.remaining })
      const done: Report = { _tag: "Consolidated", workerTaskId: result.taskId, files: changes.written, removed: changes.removed, remaining: repair.remaining }
      return done
    })).pipe(
      Effect.tapError((error) => MemoryEvents.emit({ _tag: "Failed", job: "dream", sessionId: current ?? "", reason: error.message })),
      Effect.provideService(FileSystem.FileSystem, fs),
      Effect.provide(context)
    )

  const spawn = (lockGate: Parameters<typeof consolidate>[0]) =>
    tasks.spawn("dream", { description: `memory consolidation of ${NodePath.basename(projectDir)}` }, (task) =>
      consolidate(lockGate, task.id))

  const dream: Dream = {
    memoryDir,
    gates,
    afterTurn: Effect.gen(function*() {
      if (!config.enabled) return Option.none()
      yield* learnId
      const id = current ?? ""
      const outcome = yield* Gate.evaluate([gates.time, gates.activity] as const)
      if (outcome._tag === "Stopped") {
        yield* MemoryEvents.emit({ _tag: "Skipped", job: "dream", sessionId: id, gate: outcome.gate, reason: outcome.reason })
        return Option.none()
      }
      return Option.some(yield* spawn(gates.lock))
    }).pipe(Effect.provideService(FileSystem.FileSystem, fs), Effect.provide(context), Effect.withSpan("Dream.afterTurn")),
    run: spawn(Gate.lock({ path: gates.lockPath, staleAfter: config.staleLock })).pipe(Effect.withSpan("Dream.run"))
  }
  return dream
})
