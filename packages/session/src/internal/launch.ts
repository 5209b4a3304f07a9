/**
 * Putting the CLI on the bus, before a session runs on it.
 *
 * A session adopts a `Launched`: the process, its stdout decoded from the
 * first line on, and the `initialize` answer when the launcher already has
 * it. `cold` only spawns (the session then writes `initialize` itself and
 * does not wait for it); `warm` spawns, writes `initialize` and reads until
 * the answer, which is what SessionPool keeps ready. What `warm` read comes
 * first in `stdout`, so the session sees and records the same lines either way.
 */
import { ProcessHost } from "@skein/kernel"
import { type CliMessage, Control, HostMessage, type Json, type Lenient } from "@skein/protocol"
import { Chunk, Effect, Option } from "effect"
import * as Crypto from "node:crypto"
import type { SessionOptions } from "../Session.js"
import { CliExited, ControlError, SpawnFailed } from "../SessionError.js"
import * as Tool from "../Tool.js"
import * as Args from "./args.js"
import type * as CliRequests from "./cliRequests.js"
import * as Executable from "./executable.js"
import * as StdoutPull from "./stdoutPull.js"

type Decoded = Lenient.Decoded<CliMessage.CliMessage>

/** The options that shape the process: what a warm one must have been started with. */
export type LaunchOptions = Pick<
  SessionOptions,
  "cwd" | "executable" | "executableArgs" | "env" | "envMode" | "configDir" | "stopTimeouts" | keyof Args.FlagOptions
>

export interface Launched {
  readonly child: ProcessHost.ChildProcess
  /** stdout, decoded, from its first line. Read it once. */
  readonly stdout: StdoutPull.Pull<Decoded>
  /** The answer to `initialize`, when the launcher sent it. */
  readonly initialized: Option.Option<Effect.Effect<Json.JsonObject | undefined, ControlError>>
  /** The session id the CLI was told to use (`--session-id`), when the launch chose or was given one. */
  readonly sessionId: Option.Option<string>
}

/** The `initialize` request: hooks, the host's toolkits, and the options only it carries. */
export const initializeRequest = (
  options: Pick<SessionOptions, "systemPrompt" | "agents" | "outputSchema">,
  requests: Pick<CliRequests.CliRequests, "hookConfig" | "sdkMcpServers">
): Control.Initialize => {
  const systemPrompt = options.systemPrompt
  return {
    subtype: "initialize",
    ...(requests.hookConfig === undefined ? {} : { hooks: requests.hookConfig }),
    ...(requests.sdkMcpServers === undefined ? {} : { sdkMcpServers: requests.sdkMcpServers }),
    ...(systemPrompt === undefined ? {} : { systemPrompt: typeof systemPrompt === "string" ? [systemPrompt] : systemPrompt }),
    ...(options.agents === undefined ? {} : { agents: options.agents }),
    ...(options.outputSchema === undefined ? {} : { jsonSchema: Tool.jsonSchema(options.outputSchema) })
  }
}

/** Bus flags and the options' own; the CLI asks the host about every permission unless told otherwise. */
const argsOf = (options: LaunchOptions) =>
  Args.build({ ...options, permissionPromptTool: options.permissionPromptTool ?? true })

const envOf = (options: LaunchOptions) => ({
  ...options.env,
  CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS: "1",
  ...(options.configDir === undefined ? {} : { CLAUDE_CONFIG_DIR: options.configDir })
})

/** The `--session-id` among `extraArgs`, as the worker passes it. */
const extraSessionId = (options: LaunchOptions): string | undefined => {
  const args = options.extraArgs ?? []
  const at = args.indexOf("--session-id")
  return at < 0 ? undefined : args[at + 1]
}

/**
 * The id the CLI is told to use: the options' own, or a fresh one for a new
 * session (no resume, no continue), so that the host knows it before the
 * first turn's `init`. A fork or a continue learns its id from `init`.
 */
const chosenSessionId = (options: LaunchOptions): { readonly id: Option.Option<string>; readonly args: ReadonlyArray<string> } => {
  const given = options.sessionId ?? extraSessionId(options)
  if (given !== undefined) return { id: Option.some(given), args: [] }
  if (options.resume !== undefined || options.continue === true) return { id: Option.none(), args: [] }
  const fresh = Crypto.randomUUID()
  return { id: Option.some(fresh), args: ["--session-id", fresh] }
}

/** Spawns the CLI in the current Scope, with the session id it was told to use, if any. */
export const spawn = (options: LaunchOptions) =>
  Effect.gen(function*() {
    const host = yield* ProcessHost.ProcessHost
    const command = options.executable ?? (yield* Executable.resolve)
    const chosen = chosenSessionId(options)
    const child = yield* host.spawn({
      command,
      args: [...(options.executableArgs ?? []), ...argsOf(options), ...chosen.args],
      cwd: options.cwd,
      env: envOf(options),
      envMode: options.envMode,
      stopTimeouts: options.stopTimeouts,
      label: `claude ${options.resume ?? ""}`.trim()
    }).pipe(Effect.mapError((e) => new SpawnFailed({ command: e.command, reason: e.reason })))
    return { child, sessionId: chosen.id }
  })


export const cold = (options: LaunchOptions) =>
  Effect.gen(function*() {
    const { child, sessionId } = yield* spawn(options)
    return { child, stdout: StdoutPull.decoded(child.pullStdout), initialized: Option.none(), sessionId } satisfies Launched
  })

let counter = 0

const answerTo = (requestId: string) => (event: Decoded): event is Lenient.Message<Control.ControlResponse> =>
  event._tag === "Message" && event.message.type === "control_response" && event.message.response.request_id === requestId

/**
 * Spawns the CLI, sends `initialize` and reads stdout up to its answer. The
 * rest of stdout stays in the pipe for the session. Fails with `CliExited`
 * when the CLI ends before it answers.
 */
export const warm = (options: LaunchOptions, initialize: Control.Initialize) =>
  Effect.gen(function*() {
    const { child, sessionId } = yield* spawn(options)
    const pull = StdoutPull.decoded(child.pullStdout)
    const requestId = `pool_${++counter}`
    const isAnswer = answerTo(requestId)
    // A write that finds stdin closed means the CLI is gone: the read below then ends and says how.
    yield* Effect.ignore(child.write(HostMessage.encode(Control.request(requestId, initialize))))
    const exited = Effect.flatMap(child.await, (s) => new CliExited({ code: s.code, signal: s.signal, stderrTail: s.stderrTail }))
    const readUntilAnswer = (
      seen: Chunk.Chunk<Decoded>
    ): Effect.Effect<readonly [Chunk.Chunk<Decoded>, Control.ControlResponse], CliExited> =>
      pull.pipe(
        Effect.catchAll(() => exited),
        Effect.flatMap((chunk) => {
          const read = Chunk.appendAll(seen, chunk)
          return Option.match(Chunk.findFirst(chunk, isAnswer), {
            onNone: () => readUntilAnswer(read),
            onSome: (answer) => Effect.succeed([read, answer.message] as const)
          })
        })
      )
    const [read, answer] = yield* readUntilAnswer(Chunk.empty())
    const initialized = answer.response.subtype === "success"
      ? Effect.succeed(answer.response.response)
      : Effect.fail(new ControlError({ subtype: "initialize", requestId, error: answer.response.error }))
    return {
      child,
      stdout: StdoutPull.prefixed(read, pull),
      initialized: Option.some(initialized),
      sessionId
    } satisfies Launched
  })

/**
 * Everything a warm process was started with, as one string: two launches
 * with the same key spawn the same process and send the same `initialize`.
 */
export const profileKey = (options: LaunchOptions, initialize: Control.Initialize): string => {
  const env = Object.entries(envOf(options)).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  return JSON.stringify([
    options.executable ?? null,
    options.executableArgs ?? [],
    argsOf(options),
    options.cwd,
    options.envMode ?? "merge",
    env.map(([k, v]) => [k, v ?? null]),
    options.stopTimeouts ?? null,
    initialize
  ])
}
