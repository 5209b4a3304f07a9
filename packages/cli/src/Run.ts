/**
 * `skein run` and `skein chat`: turns of a real Claude Code session in the
 * current folder, through `Session.start`. By default the CLI runs with the
 * person's own login and environment; `--fake-model` runs it offline
 * against a local fake model with a throwaway config folder.
 */
import { Args, Command, HelpDoc, Options } from "@effect/cli"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeStream from "@effect/platform-node/NodeStream"
import { Permissions, Session, type SessionError, type Turn } from "@skein/session"
import { ClaudeCli } from "@skein/testkit"
import { Effect, Option, Stream } from "effect"
import * as Path from "node:path"
import { CliError, fail, interruptedCode, oneLine } from "./CliError.js"
import { CtrlC } from "./CtrlC.js"
import type * as Argv from "./internal/argv.js"
import * as FakeModel from "./internal/fakeModel.js"
import * as Output from "./Output.js"

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------

const toolList = (name: string, description: string) =>
  Options.text(name).pipe(
    Options.withDescription(description),
    Options.repeated,
    Options.map((values) => values.flatMap((v) => v.split(",")).map((v) => v.trim()).filter((v) => v.length > 0))
  )

export const sessionOptions = {
  fakeModel: Options.boolean("fake-model").pipe(
    Options.withDescription("run offline: a local fake model, a throwaway config folder (unless --root), no network")
  ),
  allow: toolList("allow", "tools that may run, comma-separated (Bash,Read,Edit,…); others are denied"),
  deny: toolList("deny", "tools that never run, comma-separated"),
  json: Options.boolean("json").pipe(Options.withDescription("print opencode's canonical events as NDJSON")),
  resume: Options.text("resume").pipe(Options.withDescription("resume the session with this id"), Options.optional),
  continue: Options.boolean("continue").pipe(Options.withDescription("continue the folder's most recent session")),
  root: Options.directory("root").pipe(
    Options.withDescription("the Claude config folder (default: CLAUDE_CONFIG_DIR, else ~/.claude)"),
    Options.optional
  ),
  model: Options.text("model").pipe(Options.withDescription("the model to use"), Options.optional),
  claude: Options.file("claude").pipe(
    Options.withDescription("the Claude Code executable (default: the installed @anthropic-ai/claude-code, else claude on PATH)"),
    Options.optional
  )
} as const

type ValueOf<O> = O extends Options.Options<infer A> ? A : never
type SessionConfig = { readonly [K in keyof typeof sessionOptions]: ValueOf<(typeof sessionOptions)[K]> }

// ---------------------------------------------------------------------------
// Starting the session
// ---------------------------------------------------------------------------

/** One line for each way starting or running a session fails. */
export const describe = (error: SessionError.TurnError | SessionError.CliNotFound | SessionError.SpawnFailed | SessionError.ResumeMismatch): CliError => {
  switch (error._tag) {
    case "CliNotFound":
      return fail(error.message)
    case "SpawnFailed":
      return fail(`could not start ${error.command}: ${error.reason}`)
    case "ResumeMismatch":
      return fail(`no session ${error.expected} to resume (${error.reason})`)
    case "CliExited":
      return fail(oneLine(error.message))
    case "SessionSilent":
      return fail(`the Claude Code CLI said nothing for ${error.silentMillis} ms`)
    case "SessionClosed":
      return fail("the session is closed")
  }
}

/** Decides `can_use_tool` from `--allow` / `--deny`, and says what it decided. */
const policy = (config: SessionConfig, output: Output.Output) =>
  Permissions.layer((request) => {
    const name = request.toolName
    const [decision, why] = config.deny.includes(name)
      ? [Permissions.deny(`${name} is denied by --deny`), "--deny"] as const
      : config.allow.includes(name)
      ? [Permissions.allow(), "--allow"] as const
      : [Permissions.deny(`${name} is not allowed here; the person can pass --allow ${name}`), `not in --allow; pass --allow ${name}`] as const
    return Effect.as(
      output.permission({ requestId: request.requestId, toolName: name, allowed: decision.behavior === "allow", why }),
      decision
    )
  })

/** Where the CLI runs: the person's own setup, or offline against the fake model. */
const target = (config: SessionConfig) =>
  Effect.gen(function*() {
    const root = Option.map(config.root, (r) => Path.resolve(r))
    if (!config.fakeModel) return { configDir: Option.getOrUndefined(root), env: undefined, bare: false }
    const model = yield* FakeModel.start.pipe(Effect.mapError((e) => fail(`the fake model could not start: ${e.message}`)))
    const fs = yield* FileSystem.FileSystem
    const scratch = yield* fs.makeTempDirectoryScoped({ prefix: "skein-run-" }).pipe(Effect.orDie)
    const configDir = Option.getOrElse(root, () => Path.join(scratch, "config"))
    const tmpDir = Path.join(scratch, "tmp")
    yield* Effect.orDie(Effect.all([fs.makeDirectory(configDir, { recursive: true }), fs.makeDirectory(tmpDir)]))
    return { configDir, env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir, tmpDir }), bare: true }
  })

const open = Effect.fn("Run.open")(function*(config: SessionConfig, output: Output.Output) {
  const where = yield* target(config)
  return yield* Session.start({
    cwd: process.cwd(),
    includePartialMessages: true,
    resume: Option.getOrUndefined(config.resume),
    continue: config.continue || undefined,
    model: Option.getOrUndefined(config.model),
    executable: Option.getOrUndefined(config.claude),
    configDir: where.configDir,
    env: where.env,
    bare: where.bare,
    stopTimeouts: { stdinGrace: "1 second", termGrace: "2 seconds" }
  }).pipe(Effect.provide(policy(config, output)), Effect.mapError(describe))
})

const outputFor = (config: SessionConfig) =>
  config.json
    ? Output.canonical({ cliSessionId: Option.getOrUndefined(config.resume), cwd: process.cwd() })
    : Output.human({ color: process.stdout.isTTY === true && process.env.NO_COLOR === undefined })

// ---------------------------------------------------------------------------
// Turns
// ---------------------------------------------------------------------------

/** Sends one prompt and shows its turn; the first Ctrl-C meanwhile interrupts it. */
const turn = (session: Session.Session, output: Output.Output, prompt: string) =>
  Effect.gen(function*() {
    const ctrlC = yield* CtrlC
    const live = yield* session.send(prompt).pipe(Effect.mapError(describe))
    yield* output.turnStarted(live.index)
    const summary = yield* ctrlC.guard(
      Effect.zipRight(Stream.runForEach(live.events, output.event), live.result),
      Effect.ignore(session.interrupt)
    ).pipe(Effect.mapError(describe))
    yield* output.turnEnded(live.index, summary)
    return summary
  })

/** Closes stdin and gives the CLI a moment to finish its transcript; the scope stops it regardless. */
const finish = (session: Session.Session, output: Output.Output) =>
  Effect.zipRight(output.end, Effect.zipRight(session.end, Effect.ignore(Effect.timeout(session.exit, "5 seconds"))))

const verdict = (summary: Turn.TurnSummary): Effect.Effect<void, CliError> => {
  if (summary.interrupted) return Effect.fail(fail("interrupted", interruptedCode))
  if (!summary.isError) return Effect.void
  const last = summary.results.at(-1)
  const errors = last !== undefined && "errors" in last && last.errors !== undefined ? `: ${last.errors.join("; ")}` : ""
  return Effect.fail(fail(`the turn failed (${last?.subtype ?? "no result"})${oneLine(errors)}`))
}

const withExample = (description: string, example: string) =>
  HelpDoc.blocks([HelpDoc.p(description), HelpDoc.p(`Example: ${example}`)])

export const run = Command.make(
  "run",
  { ...sessionOptions, prompt: Args.text({ name: "prompt" }).pipe(Args.withDescription("what to ask")) },
  ({ prompt, ...config }) =>
    Effect.gen(function*() {
      const output = yield* outputFor(config)
      const session = yield* open(config, output)
      const summary = yield* turn(session, output, prompt)
      yield* finish(session, output)
      yield* verdict(summary)
    }).pipe(Effect.scoped)
).pipe(Command.withDescription(withExample(
  "Run one turn of Claude Code in the current folder and print it as it streams.",
  "skein run \"list the files here\" --allow Bash,Read"
)))

/** stdin as lines; on a terminal, a prompt before each. */
const promptLines = Stream.suspend(() => {
  const tty = process.stdin.isTTY === true
  const ask = Effect.sync(() => {
    if (tty) process.stderr.write("> ")
  })
  const lines = NodeStream.fromReadable<Error, Uint8Array>(() => process.stdin, (e) => e instanceof Error ? e : new Error(String(e)))
  return Stream.fromEffect(ask).pipe(
    Stream.drain,
    Stream.concat(lines.pipe(Stream.decodeText(), Stream.splitLines, Stream.orDie)),
    Stream.map((line) => ({ line, ask }))
  )
})

export const chat = Command.make("chat", sessionOptions, (config) =>
  Effect.gen(function*() {
    const output = yield* outputFor(config)
    const session = yield* open(config, output)
    yield* promptLines.pipe(
      Stream.runForEach(({ ask, line }) =>
        line.trim().length === 0
          ? ask
          // A failed or interrupted turn is noted and the chat goes on; a session that ended ends it.
          : Effect.zipRight(turn(session, output, line), ask)
      )
    )
    yield* finish(session, output)
  }).pipe(Effect.scoped)).pipe(Command.withDescription(withExample(
    "Chat with Claude Code in the current folder: each line of stdin is a turn; end with Ctrl-D.",
    "skein chat --fake-model --allow Bash"
  )))

const usageOf = (options: Record<string, Options.Options<unknown>>) => Options.getUsage(Options.all(options))

export const runSpec: Argv.Spec = { name: "run", options: usageOf(sessionOptions), children: [] }
export const chatSpec: Argv.Spec = { name: "chat", options: usageOf(sessionOptions), children: [] }
