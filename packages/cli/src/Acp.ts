/**
 * `skein acp`: an Agent Client Protocol agent on stdio (`@skein/acp`), for
 * editors that run agents as subprocesses (Zed's `agent_servers`, JetBrains
 * IDEs, Neovim and Emacs plugins) and headless clients such as `acpx`.
 * stdout carries JSON-RPC alone: logs go to stderr. When the client closes
 * stdin, every session ends and the command exits with no process left.
 * A warm CLI process (`--pool`, 1 by default) makes `session/new` in the
 * current folder immediate.
 */
import { Command, HelpDoc, Options } from "@effect/cli"
import * as Acp from "@agentclientprotocol/sdk/unstable"
import { AcpAgent } from "@skein/acp"
import { TranscriptLayout } from "@skein/store"
import { Effect, Logger, Option } from "effect"
import { Readable, Writable } from "node:stream"
import * as Argv from "./internal/argv.js"
import * as Launch from "./internal/launch.js"
import { rootOption } from "./internal/lookup.js"

const acpOptions = {
  fakeModel: Options.boolean("fake-model").pipe(
    Options.withDescription("run offline: a local fake model, a throwaway config folder (unless --root), no network")
  ),
  root: rootOption,
  claude: Options.file("claude").pipe(
    Options.withDescription("the Claude Code executable (default: the installed @anthropic-ai/claude-code, else claude on PATH)"),
    Options.optional
  ),
  pool: Options.integer("pool").pipe(
    Options.withDescription("CLI processes kept warm for new sessions in the current folder (0: none)"),
    Options.withDefault(1)
  )
} as const

interface AcpConfig {
  readonly fakeModel: boolean
  readonly root: Option.Option<string>
  readonly claude: Option.Option<string>
  readonly pool: number
}

/** stdio as the SDK's NDJSON stream: what the client writes to our stdin, what we write to our stdout. */
const stdio = (): Acp.Stream =>
  Acp.ndJsonStream(
    Writable.toWeb(process.stdout),
    Readable.toWeb(process.stdin)
  )

const serveStdio = Effect.fn("Acp.serveStdio")(function*(config: AcpConfig) {
  const where = yield* Launch.target({ fakeModel: config.fakeModel, root: config.root })
  const configDir = where.configDir ?? (yield* Effect.orDie(TranscriptLayout.rootConfig))
  yield* AcpAgent.serve(stdio(), {
    configDir,
    session: {
      ...(where.env === undefined ? {} : { env: where.env }),
      ...(where.configDir === undefined ? {} : { configDir: where.configDir }),
      bare: where.bare,
      executable: Option.getOrUndefined(config.claude)
    },
    pool: { size: config.pool, cwd: process.cwd() },
    name: "skein"
  })
})

/** Nothing but JSON-RPC on stdout: every log line goes to stderr. */
const logsToStderr = Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))

export const acp = Command.make("acp", acpOptions, (config) => Effect.scoped(serveStdio(config)).pipe(Effect.provide(logsToStderr))).pipe(
  Command.withDescription(HelpDoc.blocks([
    HelpDoc.p(
      "Serve Claude Code sessions over the Agent Client Protocol on stdin/stdout, for editors (Zed, JetBrains, Neovim, Emacs) and acpx. " +
        "Exits when stdin closes."
    ),
    HelpDoc.p("Example: acpx --agent \"skein acp\" exec \"what does this folder hold?\"")
  ]))
)

export const acpSpec: Argv.Spec = Argv.leaf("acp", acpOptions)
