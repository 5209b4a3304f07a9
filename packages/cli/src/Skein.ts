/**
 * The `skein` command: its tree, and the one way it reports a failure — one
 * line on stderr and a non-zero exit status (2 for a command line it cannot
 * run, 1 for a failure while running, 130 after Ctrl-C).
 */
import { CliConfig, Command, HelpDoc, Options } from "@effect/cli"
import { Cause, Console, Effect, Either } from "effect"
import { CliError, interruptedCode, oneLine } from "./CliError.js"
import { CtrlC } from "./CtrlC.js"
import * as Argv from "./internal/argv.js"
import { acp, acpSpec } from "./Acp.js"
import { chat, chatSpec, run, runSpec } from "./Run.js"
import { compact, compactSpec } from "./Compact.js"
import { dream, dreamSpec, memory, memorySpec } from "./Memory.js"
import { serve, serveSpec } from "./Serve.js"
import { sessions, sessionsSpec } from "./Sessions.js"
import { tasks, tasksSpec } from "./Tasks.js"
import { pipeline, pipelineSpec } from "./Pipeline.js"

export const version = "0.1.0"

export const skein = Command.make("skein").pipe(
  Command.withDescription(HelpDoc.blocks([
    HelpDoc.p("Run and keep Claude Code sessions from the terminal. Options go before or after the command; --help on any command shows its own."),
    HelpDoc.p("Example: skein run \"what does this folder hold?\" --allow Read")
  ])),
  Command.withSubcommands([run, chat, serve, sessions, tasks, compact, memory, dream, pipeline, acp])
)

export const spec: Argv.Spec = { name: "skein", options: Options.getUsage(Options.none), children: [runSpec, chatSpec, serveSpec, sessionsSpec, tasksSpec, compactSpec, memorySpec, dreamSpec, pipelineSpec, acpSpec] }

const usageCode = 2

/** stderr with every message folded into one line, so a help document @effect/cli prints for a usage error stays one line. */
const withOneLineErrors = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Console.consoleWith(Effect.succeed), (console: Console.Console) =>
    Effect.withConsole(effect, {
      ...console,
      error: (...args: ReadonlyArray<unknown>) => console.error(`skein: ${oneLine(args.map(String).join(" "))}`)
    }))

const report = (error: CliError) => Effect.as(Console.error(error.message), error.code)

// eslint-disable-next-line no-control-regex
const ansi = /\x1b\[[0-9;]*m/g

/**
 * stdout as a person reads it: no colour codes unless it is a terminal (and
 * NO_COLOR is unset), and help's usage lines as typed, `$ skein run …`
 * (@effect/cli names the subcommand alone).
 */
const readableStdout = (commandPath: ReadonlyArray<string>) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Console.consoleWith(Effect.succeed), (console: Console.Console) => {
    const color = process.stdout.isTTY === true && process.env["NO_COLOR"] === undefined
    const last = commandPath.at(-1)
    const usage = last === undefined ? /^\$ (?!skein\b)/gm : new RegExp(`^\\$ (?:${last}\\b)?(?!skein\\b)`, "gm")
    const typed = ["skein", ...commandPath].join(" ")
    const rewrite = (text: string) => {
      const plain = color ? text : text.replace(ansi, "")
      return plain.includes("USAGE") ? plain.replace(usage, (matched) => matched === "$ " ? "$ skein " : `$ ${typed}`) : plain
    }
    return Effect.withConsole(effect, {
      ...console,
      log: (...args: ReadonlyArray<unknown>) => console.log(...args.map((arg) => typeof arg === "string" ? rewrite(arg) : arg))
    })
  })

/** The subcommand path of normalized arguments (they come first): what help's usage is named after. */
const commandPathOf = (args: ReadonlyArray<string>): ReadonlyArray<string> => {
  const firstOption = args.findIndex((arg) => arg.startsWith("-"))
  return firstOption === -1 ? args : args.slice(0, firstOption)
}

/** Help without @effect/cli's own options (--wizard, --completions, --log-level) on every command. */
const cliConfig = CliConfig.layer({ showBuiltIns: false })

/**
 * Runs the command line (`argv` as `process.argv`) and returns the exit
 * status; it never fails. A quitting Ctrl-C interrupts the command.
 */
export const main = (argv: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const normalized = Argv.normalize(spec, argv.slice(2))
    if (Either.isLeft(normalized)) return yield* report(new CliError({ message: normalized.left, code: usageCode }))
    const cli = Command.run(skein, { name: "skein", version })
    const ctrlC = yield* CtrlC
    return yield* cli([...argv.slice(0, 2), ...normalized.right]).pipe(
      Effect.provide(cliConfig),
      readableStdout(commandPathOf(normalized.right)),
      Effect.as(0),
      Effect.raceFirst(Effect.as(ctrlC.quit, interruptedCode)),
      Effect.catchAll((error) =>
        // @effect/cli has already printed its own (one-line) account of a usage error.
        error instanceof CliError ? report(error) : Effect.succeed(usageCode)
      ),
      Effect.catchAllCause((cause) =>
        Effect.as(Console.error(`internal error: ${oneLine(Cause.pretty(cause)).slice(0, 400)}`), 1)
      )
    )
  }).pipe(withOneLineErrors)
