/**
 * Memory extraction: after each turn, a fully isolated forked worker reads
 * the messages since the session's cursor and writes durable memories into
 * the project's memory folder, in the CLI's own format.
 *
 * - The worker is a fork of the session (the prompt cache is shared), with
 *   at most `maxTurns` turns and its own `Permissions` policy: it may read,
 *   and write only inside the memory folder. It records to its sidechain.
 * - A turn in which the main agent wrote to the memory folder itself is
 *   skipped (the cursor still moves past it).
 * - Runs go through a `SingleFlight`: a request during a run is stashed and
 *   one trailing run follows, so there are never two writers.
 * - After the worker, skein checks and repairs the index itself. A worker
 *   whose turn failed (`TurnFailed`) fails the run, and the cursor stays.
 *
 * @since 0.0.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import type { Session } from "@skein/session"
import { Worker } from "@skein/session"
import { TranscriptLayout, TranscriptStore } from "@skein/store"
import { Effect, Option, type Scope, Stream } from "effect"
import * as ExtractionCursor from "./ExtractionCursor.js"
import * as FolderDiff from "./internal/folderDiff.js"
import * as Prompts from "./internal/prompts.js"
import * as MemoryEvents from "./MemoryEvents.js"
import * as MemoryFolder from "./MemoryFolder.js"
import * as MemoryPolicy from "./MemoryPolicy.js"
import * as SingleFlight from "./SingleFlight.js"

/**
 * @since 0.0.0
 */
export interface Config {
  readonly enabled: boolean
  /** The worker's turns. Default 5. */
  readonly maxTurns: number
  readonly limits: MemoryFolder.Limits
}

/**
 * @since 0.0.0
 */
export const defaultConfig: Config = { enabled: true, maxTurns: 5, limits: MemoryFolder.defaultLimits }

/**
 * @since 0.0.0
 */
export interface Options {
  /** The session's worker pool (`Worker.pool`). */
  readonly workers: Worker.Workers
  /** How the session was started: its `cwd` and `configDir` locate the memory folder. */
  readonly launch: Session.SessionOptions
  readonly config?: Partial<Config> | undefined
}

/**
 * @since 0.0.0
 */
export interface Extraction {
  readonly memoryDir: string
  /** Starts a run, or stashes one behind the current run; `disabled` when turned off. */
  readonly request: Effect.Effect<"started" | "stashed" | "disabled">
  /** By hand (`Memory.extract(session)`): a run, even when turned off, and waits for the guard to be idle. */
  readonly extract: Effect.Effect<void>
  /** Waits until no run is going and none is owed. */
  readonly idle: Effect.Effect<void>
  /** Requests a run after each of the session's turns, for as long as the current scope. */
  readonly afterEachTurn: Effect.Effect<void, never, Scope.Scope>
}

const configRootOf = (launch: Session.SessionOptions): string =>
  launch.configDir ?? process.env["CLAUDE_CONFIG_DIR"] ?? `${process.env["HOME"] ?? ""}/.claude`

/**
 * Extraction for the session of `options.workers`. Its runs live in the
 * current scope.
 *
 * @since 0.0.0
 */
export const make = Effect.fn("Extraction.make")(function*(options: Options) {
  const config: Config = { ...defaultConfig, ...options.config }
  const fs = yield* FileSystem.FileSystem
  const store = yield* TranscriptStore.TranscriptStore
  const parent = options.workers.parent
  const cwd = yield* TranscriptLayout.canonicalCwd(options.launch.cwd)
  const projectDir = TranscriptLayout.projectDir(configRootOf(options.launch), cwd)
  const memoryDir = MemoryFolder.directory(configRootOf(options.launch), cwd)

  const runOnce = Effect.gen(function*() {
    const sessionId = yield* parent.sessionId
    const cursorFile = ExtractionCursor.file(projectDir, sessionId)
    const transcript = yield* store.read(options.launch.cwd, sessionId)
    const pending = ExtractionCursor.pending(transcript.entries, yield* ExtractionCursor.load(cursorFile))
    const last = pending.messages.at(-1)
    if (last === undefined) {
      return yield* MemoryEvents.emit({ _tag: "Skipped", job: "extraction", sessionId, gate: "cursor", reason: "no new messages" })
    }
    if (ExtractionCursor.wroteMemory(pending.messages, memoryDir, cwd)) {
      yield* ExtractionCursor.save(cursorFile, last.uuid)
      return yield* MemoryEvents.emit({
        _tag: "Skipped",
        job: "extraction",
        sessionId,
        gate: "main-agent",
        reason: "the main agent wrote to the memory folder in this turn"
      })
    }
    const before = yield* FolderDiff.contents(memoryDir)
    const index = (yield* fs.readFileString(`${memoryDir}/${MemoryFolder.indexName}`).pipe(Effect.option)).pipe(
      Option.getOrElse(() => "")
    )
    yield* Effect.scoped(Effect.gen(function*() {
      const worker = yield* options.workers.fork({
        mode: "isolated",
        label: "memory-extraction",
        description: `memory extraction of ${pending.messages.length} messages`,
        prompt: Prompts.extraction({ memoryDir, messages: pending.messages.length, index: index.trimEnd(), limits: config.limits }),
        maxTurns: config.maxTurns,
        permissions: MemoryPolicy.memoryWorker(memoryDir)
      })
      yield* MemoryEvents.emit({ _tag: "Started", job: "extraction", sessionId, taskId: worker.taskId })
      // A worker whose turn failed fails the run before the cursor moves: the next run reads these messages again.
      return yield* Effect.flatMap(worker.result, Worker.succeeded)
    }))
    const repair = yield* MemoryFolder.repair(memoryDir, config.limits)
    const changes = FolderDiff.diff(before, yield* FolderDiff.contents(memoryDir))
    yield* ExtractionCursor.save(cursorFile, last.uuid)
    yield* MemoryEvents.emit({
      _tag: "Wrote",
      job: "extraction",
      sessionId,
      files: changes.written,
      removed: changes.removed,
      repaired: repair.fixed,
      remaining: repair.remaining
    })
  }).pipe(Effect.withSpan("Extraction.run"))

  const failed = (error: { readonly _tag: string; readonly message?: string }) =>
    Effect.flatMap(Effect.option(parent.sessionId), (id) =>
      MemoryEvents.emit({
        _tag: "Failed",
        job: "extraction",
        sessionId: Option.getOrElse(id, () => ""),
        reason: error.message ?? error._tag
      }))

  const flight = yield* SingleFlight.make(runOnce.pipe(Effect.provideService(FileSystem.FileSystem, fs)), failed)
  const extraction: Extraction = {
    memoryDir,
    request: config.enabled ? flight.request : Effect.succeed("disabled"),
    extract: Effect.zipRight(flight.request, flight.idle),
    idle: flight.idle,
    afterEachTurn: Effect.gen(function*() {
      const turns = yield* parent.turns
      yield* Stream.fromQueue(turns).pipe(
        Stream.runForEach((turn) => Effect.zipRight(Effect.ignore(turn.result), extractionRequest(config, flight))),
        Effect.forkScoped
      )
    })
  }
  return extraction
})

const extractionRequest = (config: Config, flight: SingleFlight.SingleFlight) =>
  config.enabled ? Effect.asVoid(flight.request) : Effect.void
