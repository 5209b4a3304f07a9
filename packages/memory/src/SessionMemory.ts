/**
 * Session memory: a running summary of one session, kept in the CLI's own
 * place, `<project>/<session>/session-memory/summary.md`, which
 * session-memory compaction then uses as its summary with no model call.
 *
 * After a turn, at most once per `everyTurns` turns or `everyTokens` tokens
 * (whichever comes first), a fully isolated forked worker rewrites the file.
 * Its prompt is skein's, its only tools are Read, Edit and Write of that one
 * file (`MemoryPolicy.summaryWorker`), and it records to its own sidechain.
 * Runs go through a `SingleFlight`: never two at once for a session, a
 * request during a run is stashed and one trailing run follows.
 *
 * After a run that changed the file, the point it covers (the parent's leaf
 * when the worker forked: the worker's copy of the session ends there) is
 * recorded beside it (`SummaryCoverage`); session-memory compaction keeps
 * every message after that point. The leaf is read before the fork, and the
 * record written only after a successful run changed the summary, so it may
 * lag the summary but never claims more than the worker saw.
 *
 * @since 0.0.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import type { Session, SessionError, Turn, Worker } from "@skein/session"
import { ResumeLoader, SummaryCoverage, TranscriptLayout } from "@skein/store"
import { Effect, Option, Ref, type Scope, Stream } from "effect"
import * as MemoryEvents from "./MemoryEvents.js"
import * as MemoryPolicy from "./MemoryPolicy.js"
import * as SingleFlight from "./SingleFlight.js"

/**
 * @since 0.0.0
 */
export interface Config {
  readonly enabled: boolean
  /** Turns between runs. Default 3. */
  readonly everyTurns: number
  /** Or this many tokens (input + output) since the last run. Default 20,000. */
  readonly everyTokens: number
  /** The worker's turns. Default 4. */
  readonly maxTurns: number
}

/**
 * @since 0.0.0
 */
export const defaultConfig: Config = { enabled: true, everyTurns: 3, everyTokens: 20_000, maxTurns: 4 }

/**
 * What has happened since the last run.
 *
 * @since 0.0.0
 */
export interface Since {
  readonly turns: number
  readonly tokens: number
}

/**
 * Counts one turn; `due` says whether a run is owed, and the counters restart when it is.
 *
 * @since 0.0.0
 */
export const count = (since: Since, usage: Turn.TurnUsage, config: Config): { readonly due: boolean; readonly next: Since } => {
  const turns = since.turns + 1
  const tokens = since.tokens + usage.inputTokens + usage.outputTokens + usage.cacheCreationInputTokens
  const due = turns >= config.everyTurns || tokens >= config.everyTokens
  return { due, next: due ? { turns: 0, tokens: 0 } : { turns, tokens } }
}

/**
 * @since 0.0.0
 */
export interface Options {
  readonly workers: Worker.Workers
  readonly launch: Session.SessionOptions
  readonly config?: Partial<Config> | undefined
}

/**
 * @since 0.0.0
 */
export interface SessionMemory {
  /** The summary file, once the session has an id. */
  readonly summaryFile: Effect.Effect<string, SessionError.TurnError>
  /** Counts a finished turn, and requests a run when one is due. */
  readonly afterTurn: (usage: Turn.TurnUsage) => Effect.Effect<"started" | "stashed" | "not-due" | "disabled">
  /** By hand: a run now (even when turned off), then waits for the guard to be idle. */
  readonly update: Effect.Effect<void>
  readonly idle: Effect.Effect<void>
  /** Counts each of the session's turns, for as long as the current scope. */
  readonly afterEachTurn: Effect.Effect<void, never, Scope.Scope>
}

const prompt = (file: string, exists: boolean) =>
  [
    "skein session memory.",
    `Keep a running summary of this session in ${file}${exists ? " (read it first, then rewrite it)" : ""}.`,
    "Write it as Markdown with these sections: Current state; The task; Files and functions that matter; Decisions and why;",
    "Errors and fixes; Next steps. Be concrete (paths, commands, names), keep it under 2,000 words, and change no other file."
  ].join("\n")

const configRootOf = (launch: Session.SessionOptions): string =>
  launch.configDir ?? process.env["CLAUDE_CONFIG_DIR"] ?? `${process.env["HOME"] ?? ""}/.claude`

/**
 * @since 0.0.0
 */
export const make = Effect.fn("SessionMemory.make")(function*(options: Options) {
  const config: Config = { ...defaultConfig, ...options.config }
  const parent = options.workers.parent
  const cwd = yield* TranscriptLayout.canonicalCwd(options.launch.cwd)
  const projectDir = TranscriptLayout.projectDir(configRootOf(options.launch), cwd)
  const summaryFile = Effect.map(parent.sessionId, (id) => TranscriptLayout.sessionPaths(projectDir, id).sessionMemorySummary)
  const since = yield* Ref.make<Since>({ turns: 0, tokens: 0 })
  const fs = yield* FileSystem.FileSystem
  const read = (file: string) => fs.readFileString(file).pipe(Effect.option)

  const runOnce = Effect.gen(function*() {
    const sessionId = yield* parent.sessionId
    const file = yield* summaryFile
    const covered = yield* ResumeLoader.load(TranscriptLayout.sessionPaths(projectDir, sessionId).transcript).pipe(
      Effect.map((view) => Option.fromNullable(view.leafUuid)),
      Effect.orElseSucceed(() => Option.none<string>())
    )
    const before = yield* read(file)
    const result = yield* Effect.scoped(Effect.gen(function*() {
      const worker = yield* options.workers.fork({
        mode: "isolated",
        label: "session-memory",
        description: "session memory",
        prompt: prompt(file, Option.isSome(before)),
        maxTurns: config.maxTurns,
        permissions: MemoryPolicy.summaryWorker(file)
      })
      yield* MemoryEvents.emit({ _tag: "Started", job: "session-memory", sessionId, taskId: worker.taskId })
      return yield* worker.result
    }))
    const after = yield* read(file)
    const changed = Option.isSome(after) && !Option.getEquivalence((a: string, b: string) => a === b)(after, before)
    if (changed && !result.isError && Option.isSome(covered)) yield* SummaryCoverage.write(file, covered.value)
    yield* MemoryEvents.emit({
      _tag: "Wrote",
      job: "session-memory",
      sessionId,
      files: changed ? [file] : [],
      removed: [],
      repaired: [],
      remaining: []
    })
    if (result.isError) yield* Effect.logWarning(`session memory ended with ${result.subtype ?? "an error"}`)
  }).pipe(Effect.withSpan("SessionMemory.run"))

  const flight = yield* SingleFlight.make(runOnce, (error) =>
    Effect.flatMap(Effect.option(parent.sessionId), (id) =>
      MemoryEvents.emit({ _tag: "Failed", job: "session-memory", sessionId: Option.getOrElse(id, () => ""), reason: error.message })))

  const afterTurn = (usage: Turn.TurnUsage) =>
    Effect.gen(function*() {
      if (!config.enabled) return "disabled" as const
      const due = yield* Ref.modify(since, (s) => {
        const counted = count(s, usage, config)
        return [counted.due, counted.next] as const
      })
      return due ? yield* flight.request : "not-due" as const
    })

  const memory: SessionMemory = {
    summaryFile,
    afterTurn,
    update: Effect.zipRight(flight.request, flight.idle),
    idle: flight.idle,
    afterEachTurn: Effect.gen(function*() {
      const turns = yield* parent.turns
      yield* Stream.fromQueue(turns).pipe(
        Stream.runForEach((turn) =>
          Effect.flatMap(Effect.option(turn.result), (summary) =>
            Option.isSome(summary) ? Effect.asVoid(afterTurn(summary.value.usage)) : Effect.void)
        ),
        Effect.forkScoped
      )
    })
  }
  return memory
})
