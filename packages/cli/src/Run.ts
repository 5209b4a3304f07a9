/**
 * `skein run` and `skein chat`: turns of a real Claude Code session in the
 * current folder, through `Session.start`. By default the CLI runs with the
 * person's own login and environment; `--fake-model` runs it offline
 * against a local fake model with a throwaway config folder.
 */
import { Args, Command, HelpDoc, Options } from "@effect/cli"
import * as NodeStream from "@effect/platform-node/NodeStream"
import { TaskManager } from "@skein/kernel"
import { Permissions, Session, type SessionError, type Turn } from "@skein/session"
import { TranscriptLayout } from "@skein/store"
import { Console, Effect, Option, Ref, Stream } from "effect"
import * as Path from "node:path"
import { CliError, fail, interruptedCode, oneLine } from "./CliError.js"
import { CtrlC } from "./CtrlC.js"
import * as Argv from "./internal/argv.js"
import * as Keys from "./internal/keys.js"
import * as Launch from "./internal/launch.js"
import * as Lookup from "./internal/lookup.js"
import * as PermissionPrompt from "./internal/permissionPrompt.js"
import * as Spinner from "./internal/spinner.js"
import * as Output from "./Output.js"
import * as Tasks from "./Tasks.js"

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
  fullCli: Options.boolean("full-cli").pipe(
    Options.withDescription("with --fake-model: the whole CLI (background tasks, hooks, CLAUDE.md) instead of --bare")
  ),
  allow: toolList("allow", "tools that may run, comma-separated (Bash,Read,Edit,…); on a terminal others are asked, else denied"),
  deny: toolList("deny", "tools that never run, comma-separated"),
  json: Options.boolean("json").pipe(Options.withDescription("print opencode's canonical events as NDJSON")),
  resume: Options.text("resume").pipe(
    Options.withDescription("resume the session with this id (or its first 8 characters, or its title)"),
    Options.optional
  ),
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
export type SessionConfig = { readonly [K in keyof typeof sessionOptions]: ValueOf<(typeof sessionOptions)[K]> }

// ---------------------------------------------------------------------------
// Starting the session
// ---------------------------------------------------------------------------

/** One line for each way starting or running a session fails. */
export const describe = (
  error: SessionError.TurnError | SessionError.TurnFailed | SessionError.CliNotFound | SessionError.SpawnFailed | SessionError.ResumeMismatch
): CliError => {
  switch (error._tag) {
    case "TurnFailed":
      return fail(oneLine(error.text))
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

/** What a turn's output and permission asks need of the terminal. */
interface Ui {
  readonly output: Output.Output
  readonly spinner: Spinner.Spinner
  readonly color: boolean
}

/**
 * Decides `can_use_tool`: `--deny` and `--allow` first; then, with a person
 * at the terminal, a prompt answered by one key ("always" allows the tool for
 * the rest of the command); otherwise a denial that says how to allow it.
 */
const policy = (config: SessionConfig, ui: Ui) =>
  Effect.map(Effect.all([Ref.make<ReadonlySet<string>>(new Set(config.allow)), Effect.makeSemaphore(1)]), ([allowed, prompts]) => {
    const interactive = Keys.interactive()
    return Permissions.layer((request) =>
      Effect.gen(function*() {
        const name = request.toolName
        const say = (allow: boolean, why: string) =>
          Effect.as(
            ui.output.permission({ requestId: request.requestId, toolName: name, allowed: allow, why }),
            allow ? Permissions.allow() : Permissions.deny(`${name} was denied (${why})`)
          )
        if (config.deny.includes(name)) return yield* say(false, "--deny")
        if ((yield* Ref.get(allowed)).has(name)) return yield* say(true, config.allow.includes(name) ? "--allow" : "always")
        if (!interactive) return yield* say(false, `not in --allow; pass --allow ${name}`)
        const answer = yield* prompts.withPermits(1)(Effect.zipRight(ui.spinner.hide, PermissionPrompt.ask(request, ui.color)))
        if (answer === "always") yield* Ref.update(allowed, (names) => new Set([...names, name]))
        return yield* say(answer !== "deny", answer === "deny" ? "at the prompt" : answer)
      })
    )
  })

/**
 * Starts the session in `cwd`, with this process's TaskManager (so that
 * `skein tasks` sees the CLI's background tasks and can stop them).
 */
const open = Effect.fn("Run.open")(function*(config: SessionConfig, ui: Ui, cwd: string) {
  const where = yield* Launch.target(config)
  const configRoot = where.configDir ?? (yield* Effect.orDie(TranscriptLayout.rootConfig))
  const { dir, tasks } = yield* Tasks.manager(configRoot)
  const session = yield* Session.start({
    cwd,
    includePartialMessages: true,
    resume: Option.getOrUndefined(config.resume),
    continue: config.continue || undefined,
    model: Option.getOrUndefined(config.model),
    executable: Option.getOrUndefined(config.claude),
    configDir: where.configDir,
    env: where.env,
    bare: where.bare,
    stopTimeouts: { stdinGrace: "1 second", termGrace: "2 seconds" }
  }).pipe(
    Effect.provide(yield* policy(config, ui)),
    Effect.provideService(TaskManager.TaskManager, tasks),
    Effect.mapError(describe)
  )
  yield* Tasks.answerKills(dir, tasks, session)
  return session
})

const wholeId = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/**
 * `--resume` as a whole id: the start of one (as `show` prints it) or a
 * title is looked up under the config root. What matches nothing is left
 * as typed, for the CLI's launch to report (`no session … to resume`).
 */
const resolveResume = (config: SessionConfig) =>
  Effect.gen(function*() {
    if (Option.isNone(config.resume) || wholeId.test(config.resume.value)) return config
    // --fake-model without --root runs in a throwaway folder: nothing there to find.
    if (config.fakeModel && Option.isNone(config.root)) return config
    const root = Option.isSome(config.root) ? config.root.value : yield* Effect.orDie(TranscriptLayout.rootConfig)
    const id = yield* Lookup.sessionIdIn(config.resume.value, Path.resolve(root))
    return Option.isSome(id) ? { ...config, resume: id } : config
  })

/** How turns are shown: canonical NDJSON with `--json`, else readable, with colour and a spinner on a terminal. */
const uiFor = (config: SessionConfig) =>
  Effect.gen(function*() {
    const color = process.stdout.isTTY === true && process.env.NO_COLOR === undefined
    const spinner = config.json ? Spinner.none : yield* Spinner.stderr
    const output = yield* (config.json
      ? Output.canonical({ cliSessionId: Option.getOrUndefined(config.resume), cwd: process.cwd() })
      : Output.human({ color, spinner }))
    return { output, spinner, color } satisfies Ui
  })

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

/** The session's id, once its turns are done (none if the CLI never said it). */
const printSessionId = (session: Session.Session, output: Output.Output) =>
  Effect.flatMap(Effect.option(session.sessionId), Option.match({ onNone: () => Effect.void, onSome: output.sessionId }))

/** A failed turn in one line: the CLI's own words (`Not logged in · Please run /login`), never a subtype. */
export const failureLine = (summary: Turn.TurnSummary): string =>
  oneLine(summary.failure?.text ?? `the turn failed (${summary.results.at(-1)?.subtype ?? "no result"})`)

const verdict = (summary: Turn.TurnSummary): Effect.Effect<void, CliError> => {
  if (summary.interrupted) return Effect.fail(fail("interrupted", interruptedCode))
  if (!summary.isError) return Effect.void
  return Effect.fail(fail(failureLine(summary)))
}

const withExample = (description: string, example: string) =>
  HelpDoc.blocks([HelpDoc.p(description), HelpDoc.p(`Example: ${example}`)])

export const run = Command.make(
  "run",
  { ...sessionOptions, prompt: Args.text({ name: "prompt" }).pipe(Args.withDescription("what to ask")) },
  ({ prompt, ...typed }) =>
    Effect.gen(function*() {
      const config = yield* resolveResume(typed)
      const ui = yield* uiFor(config)
      const session = yield* open(config, ui, process.cwd())
      const summary = yield* turn(session, ui.output, prompt)
      yield* finish(session, ui.output)
      yield* printSessionId(session, ui.output)
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

/** A chat: a turn per line of stdin in one session, in `cwd`, until stdin ends. */
export const chatLoop = (typed: SessionConfig, cwd: string) =>
  Effect.gen(function*() {
    const config = yield* resolveResume(typed)
    const ui = yield* uiFor(config)
    const session = yield* open(config, ui, cwd)
    yield* promptLines.pipe(
      Stream.runForEach(({ ask, line }) =>
        line.trim().length === 0
          ? ask
          // A failed or interrupted turn is noted and the chat goes on; a session that ended ends it.
          : turn(session, ui.output, line).pipe(
            Effect.tap((summary) => summary.isError && !summary.interrupted ? Console.error(failureLine(summary)) : Effect.void),
            Effect.zipRight(ask)
          )
      )
    )
    yield* finish(session, ui.output)
    yield* printSessionId(session, ui.output)
  }).pipe(Effect.scoped)

export const chat = Command.make("chat", sessionOptions, (config) => chatLoop(config, process.cwd())).pipe(
  Command.withDescription(withExample(
    "Chat with Claude Code in the current folder: each line of stdin is a turn; end with Ctrl-D.",
    "skein chat --fake-model --allow Bash"
  ))
)

export const runSpec: Argv.Spec = Argv.leaf("run", sessionOptions)
export const chatSpec: Argv.Spec = Argv.leaf("chat", sessionOptions)
