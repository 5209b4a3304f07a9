/**
 * `skein pipeline run <file>`: runs the pipeline a module exports.
 *
 * The module's default export is a `Definition`: the pipeline, its inputs,
 * and optionally the replies of the fake model for `--fake-model`. Every run
 * is durable: its (item, stage) results go to a sqlite journal (`--journal`,
 * default `~/.skein/pipeline/journal.db`), and `--resume <run id>` starts the
 * run again under that id, skipping what is done. Items that failed after
 * their retries are recorded too, and a resume runs them again (a flaky
 * model, or a stage fixed since), each reported first as a retry with the
 * recorded failure.
 *
 * stdout gets the outputs, one JSON a line (with `--json`: the run events as
 * NDJSON, then the outputs as one last line). stderr gets the run id and the
 * progress: a line redrawn in place on a terminal (done, running, failed,
 * cost against budget, ETA), plain lines otherwise. Ctrl-C interrupts the
 * run (every session below it, so no CLI is left), prints the run id to
 * resume with, and exits 130.
 */
import { Args, Command, HelpDoc, Options } from "@effect/cli"
import * as FileSystem from "@effect/platform/FileSystem"
import { type ProcessHost, TaskManager } from "@skein/kernel"
import { Journal, Launch, Pipeline, type PipelineError, Run, RunEvent } from "@skein/pipeline"
import type { Session } from "@skein/session"
import { TranscriptLayout, TranscriptStore } from "@skein/store"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Console, Effect, Fiber, Layer, Option, type Scope, Stream } from "effect"
import * as Os from "node:os"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"
import { type CliError, fail, oneLine } from "./CliError.js"
import * as Argv from "./internal/argv.js"
import * as CliFakeModel from "./internal/fakeModel.js"

/** What a pipeline's sessions may need; the command provides all of it. */
export type Services = ProcessHost.ProcessHost | FileSystem.FileSystem | TaskManager.TaskManager | TranscriptStore.TranscriptStore

/** What a pipeline module exports by default: made by `define`, which keeps the pipeline's types inside. */
export interface Definition {
  readonly start: (options: Run.Options) => Effect.Effect<
    Run.Handle<Run.Result<unknown>, unknown>,
    PipelineError.BudgetInvalid,
    Scope.Scope | Launch.Launch | Services
  >
  /** How `--fake-model` answers; by default the command's own fake model (text replies only). */
  readonly fakeModel?: ((request: FakeModel.RecordedRequest) => FakeModel.Reply) | undefined
}

/** `export default define({ pipeline, inputs })` in a module for `skein pipeline run`. */
export const define = <In, Out, E, R extends Services | Launch.Launch>(definition: {
  readonly pipeline: Pipeline.Pipeline<In, Out, E, R>
  readonly inputs: Iterable<In> | Stream.Stream<In, unknown>
  readonly fakeModel?: ((request: FakeModel.RecordedRequest) => FakeModel.Reply) | undefined
}): Definition => ({
  start: (options) => Run.start(definition.pipeline, definition.inputs, options),
  fakeModel: definition.fakeModel
})

const isDefinition = (value: unknown): value is Definition =>
  typeof value === "object" && value !== null && "start" in value && typeof value.start === "function"

const load = (file: string) =>
  Effect.tryPromise({
    try: () => import(pathToFileURL(Path.resolve(file)).href),
    catch: (e) => fail(`cannot load ${file}: ${oneLine(e instanceof Error ? e.message : String(e))}`, 2)
  }).pipe(
    Effect.flatMap((module: { readonly default?: unknown }) =>
      isDefinition(module.default)
        ? Effect.succeed(module.default)
        : Effect.fail(fail(`${file} has no default export made by define({ pipeline, inputs })`, 2))
    )
  )

const runOptions = {
  budget: Options.float("budget").pipe(Options.withDescription("most USD the run may spend"), Options.optional),
  budgetTokens: Options.integer("budget-tokens").pipe(Options.withDescription("most tokens the run may use"), Options.optional),
  concurrency: Options.integer("concurrency").pipe(
    Options.withDescription("items at once in every stage that does not set its own (default 4)"),
    Options.withDefault(4)
  ),
  resume: Options.text("resume").pipe(
    Options.withDescription("start the run with this id again: what is done is skipped, what failed is run again"),
    Options.optional
  ),
  journal: Options.file("journal").pipe(Options.withDescription("the sqlite journal (default ~/.skein/pipeline/journal.db)"), Options.optional),
  json: Options.boolean("json").pipe(Options.withDescription("print the run events as NDJSON on stdout")),
  fakeModel: Options.boolean("fake-model").pipe(Options.withDescription("run offline against a local fake model")),
  claude: Options.file("claude").pipe(Options.withDescription("the Claude Code executable"), Options.optional)
} as const

interface RunOptions {
  readonly budget: Option.Option<number>
  readonly budgetTokens: Option.Option<number>
  readonly concurrency: number
  readonly resume: Option.Option<string>
  readonly journal: Option.Option<string>
  readonly json: boolean
  readonly fakeModel: boolean
  readonly claude: Option.Option<string>
}

const usd = (n: number) => `$${n.toFixed(4)}`

/** One line of where the run stands: done, running, failed, cost against budget, ETA. */
export const progressLine = (s: RunEvent.Summary, now: number): string => {
  const total = s.total === null ? "" : `/${s.total}`
  const items = `${s.settled - s.failed - s.skipped}${total} done, ${s.running} running, ${s.failed} failed`
  const cost = s.budget.usd === null ? usd(s.spent.usd) : `${usd(s.spent.usd)} of ${usd(s.budget.usd)}`
  const finished = s.settled
  const left = s.total === null ? undefined : s.total - finished
  const eta = left === undefined || finished === 0 || left === 0 ? "" : `, ETA ${Math.ceil(((now - s.startedAtMillis) / finished) * left / 1000)}s`
  return `${items}, ${cost}${eta}`
}

/** A plain line for an event worth a line; none for the rest. */
const eventLine = (event: RunEvent.RunEvent): string | undefined => {
  switch (event._tag) {
    case "ItemDone":
      return `done ${event.stage} #${event.index}${event.recorded ? " (recorded)" : ""}`
    case "ItemFailed":
      return `failed ${event.stage} #${event.index}: ${oneLine(event.reason)}`
    case "ItemRetried":
      return `retry ${event.stage} #${event.index} (attempt ${event.attempt}): ${oneLine(event.reason)}`
    case "ItemSkipped":
      return `skipped ${event.stage} #${event.index}: the budget left cannot cover a turn`
    default:
      return undefined
  }
}

/**
 * Reports the run on stderr (and, with `--json`, its events on stdout) until
 * it ends; on a terminal, the progress line is ended however the report
 * ends, so what is printed next starts a line of its own.
 */
const report = (handle: Run.Handle<unknown, unknown>, json: boolean) => {
  const tty = process.stderr.isTTY === true
  return handle.events.pipe(
    Stream.runForEach((event) =>
      Effect.gen(function*() {
        if (json) process.stdout.write(RunEvent.encodeLine(event))
        if (tty) {
          const summary = yield* handle.summary.get
          process.stderr.write(`\r\x1b[2K${progressLine(summary, Date.now())}`)
        } else {
          const line = eventLine(event)
          if (line !== undefined) process.stderr.write(`${line}\n`)
        }
      })
    ),
    Effect.ensuring(Effect.sync(() => tty && process.stderr.write("\n")))
  )
}

/** Where every session runs: the person's CLI, or offline against a fake model. */
const launchOf = (definition: Definition, options: RunOptions): Effect.Effect<
  { readonly launch: Session.SessionOptions; readonly configDir: string },
  CliError,
  FileSystem.FileSystem | Scope.Scope
> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const cwd = process.cwd()
    const executable = Option.getOrUndefined(options.claude)
    if (!options.fakeModel) {
      const configDir = process.env["CLAUDE_CONFIG_DIR"] ?? Path.join(Os.homedir(), ".claude")
      return { launch: { cwd, executable }, configDir }
    }
    const model = yield* FakeModel.make({ fallback: definition.fakeModel ?? CliFakeModel.reply }).pipe(
      Effect.mapError((e) => fail(`the fake model could not start: ${e.message}`))
    )
    const scratch = yield* fs.makeTempDirectoryScoped({ prefix: "skein-pipeline-" }).pipe(Effect.orDie)
    const configDir = Path.join(scratch, "config")
    const tmpDir = Path.join(scratch, "tmp")
    yield* Effect.orDie(Effect.all([fs.makeDirectory(configDir, { recursive: true }), fs.makeDirectory(tmpDir)]))
    return {
      launch: {
        cwd,
        executable,
        configDir,
        env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir, tmpDir }),
        bare: true,
        stopTimeouts: { stdinGrace: "500 millis", termGrace: "1 second" }
      },
      configDir
    }
  })

const journalOf = (options: RunOptions) =>
  Effect.gen(function*() {
    const file = Option.getOrElse(options.journal, () => Path.join(Os.homedir(), ".skein", "pipeline", "journal.db"))
    const fs = yield* FileSystem.FileSystem
    yield* fs.makeDirectory(Path.dirname(file), { recursive: true }).pipe(Effect.orDie)
    return file
  })

const describeError = (error: unknown): string =>
  typeof error === "object" && error !== null && "message" in error && typeof error.message === "string"
    ? oneLine(error.message)
    : oneLine(String(error))

const runPipeline = Effect.fn("Pipeline.run")(function*(file: string, options: RunOptions) {
  const definition = yield* load(file)
  const { configDir, launch } = yield* launchOf(definition, options)
  const journal = yield* journalOf(options)
  const tasks = yield* TaskManager.make({ root: Path.join(Path.dirname(journal), "tasks") })
  // Built once, in the command's scope: the run's fiber uses them until it ends.
  const services = yield* Layer.build(Layer.mergeAll(
    Launch.layer(launch),
    Journal.layerSqlite(journal),
    TranscriptStore.layer.pipe(Layer.provide(TranscriptLayout.layer(configDir))),
    Layer.succeed(TaskManager.TaskManager, tasks)
  ))
  const budget = {
    usd: Option.getOrUndefined(options.budget),
    tokens: Option.getOrUndefined(options.budgetTokens)
  }
  const handle = yield* definition.start({ runId: Option.getOrUndefined(options.resume), budget }).pipe(
    Effect.provide(services),
    Effect.mapError((e) => fail(e.message, 2))
  )
  yield* Console.error(`run ${handle.runId}`)
  const reporter = yield* Effect.fork(report(handle, options.json))
  const resumeHint = `resume with: skein pipeline run ${file} --resume ${handle.runId}`
  const result = yield* handle.await.pipe(
    // The report stops first, so the line says where the run stopped and nothing redraws over it.
    Effect.onInterrupt(() => Effect.zipRight(Fiber.interrupt(reporter), Console.error(`interrupted run ${handle.runId}; ${resumeHint}`))),
    Effect.mapError((e) => fail(`run ${handle.runId}: ${describeError(e)}; ${resumeHint}`))
  )
  yield* reporter.await
  if (options.json) {
    process.stdout.write(`${JSON.stringify({ _tag: "RunResult", runId: result.runId, outputs: result.outputs })}\n`)
  } else {
    for (const output of result.outputs) process.stdout.write(`${JSON.stringify(output)}\n`)
  }
  yield* Console.error(`run ${result.runId}: ${progressLine(result.summary, Date.now())}`)
})

const run = Command.make(
  "run",
  { ...runOptions, file: Args.file({ name: "file", exists: "yes" }) },
  ({ file, ...options }) =>
    Effect.scoped(runPipeline(file, options)).pipe(Effect.provideService(Pipeline.Concurrency, Math.max(1, options.concurrency)))
).pipe(
  Command.withDescription(HelpDoc.blocks([
    HelpDoc.p("Run the pipeline a module exports (its default export, define({ pipeline, inputs })), durably: --resume <run id> skips what is done."),
    HelpDoc.p("Example: skein pipeline run examples/pipeline.ts --fake-model --budget 0.50")
  ]))
)

export const pipeline = Command.make("pipeline").pipe(
  Command.withDescription("Durable, budgeted pipelines of Claude Code sessions"),
  Command.withSubcommands([run])
)

export const pipelineSpec: Argv.Spec = Argv.group("pipeline", { run: runOptions })
