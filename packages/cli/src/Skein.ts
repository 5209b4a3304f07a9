/**
 * The `skein` command: its tree, and the one way it reports a failure — one
 * line on stderr and a non-zero exit status (2 for a command line it cannot
 * run, 1 for a failure while running, 130 after Ctrl-C).
 */
import { Command, HelpDoc, Options } from "@effect/cli"
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

export const version = "0.1.0"

export const skein = Command.make("skein").pipe(
  Command.withDescription(HelpDoc.blocks([
    HelpDoc.p("Run and keep Claude Code sessions from the terminal. Options go before or after the command."),
    HelpDoc.p("Example: skein run \"what does this folder hold?\" --allow Read")
  ])),
  Command.withSubcommands([run, chat, serve, sessions, tasks, compact, memory, dream, acp])
)

export const spec: Argv.Spec = { name: "skein", options: Options.getUsage(Options.none), children: [runSpec, chatSpec, serveSpec, sessionsSpec, tasksSpec, compactSpec, memorySpec, dreamSpec, acpSpec] }

const usageCode = 2

/** stderr with every message folded into one line, so a help document @effect/cli prints for a usage error stays one line. */
const withOneLineErrors = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Console.consoleWith(Effect.succeed), (console: Console.Console) =>
    Effect.withConsole(effect, {
      ...console,
      error: (...args: ReadonlyArray<unknown>) => console.error(`skein: ${oneLine(args.map(String).join(" "))}`)
    }))

const report = (error: CliError) => Effect.as(Console.error(error.message), error.code)

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
