/**
 * A harness for the real Claude Code CLI: it finds the installed executable,
 * builds an offline environment pointed at a FakeModel, and runs the CLI in
 * throwaway config, working and temp directories that vanish with the scope.
 *
 * @since 0.0.0
 */
import { StreamJson } from "@skein/protocol"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodeStream from "@effect/platform-node/NodeStream"
import type { Scope } from "effect"
import { Chunk, Deferred, Effect, Ref, Schema, Stream } from "effect"
import * as ChildProcess from "node:child_process"
import * as NodeFs from "node:fs"
import { createRequire } from "node:module"
import * as Os from "node:os"
import * as Path from "node:path"
import * as ProcessTree from "./internal/processTree.js"

/**
 * The `@anthropic-ai/claude-code` package or its executable is not installed.
 *
 * @since 0.0.0
 */
export class ClaudeCliNotFound extends Schema.TaggedError<ClaudeCliNotFound>()("ClaudeCliNotFound", {
  message: Schema.String
}) {}

/**
 * The operating system refused to start the CLI.
 *
 * @since 0.0.0
 */
export class ClaudeCliSpawnError extends Schema.TaggedError<ClaudeCliSpawnError>()("ClaudeCliSpawnError", {
  message: Schema.String
}) {}

/**
 * Writing to the CLI's stdin failed: the process has closed it or exited.
 *
 * @since 0.0.0
 */
export class ClaudeCliStdinError extends Schema.TaggedError<ClaudeCliStdinError>()("ClaudeCliStdinError", {
  message: Schema.String
}) {}

/**
 * stdout ended before the CLI printed a `result` message.
 *
 * @since 0.0.0
 */
export class ClaudeCliNoResult extends Schema.TaggedError<ClaudeCliNoResult>()("ClaudeCliNoResult", {
  exitCode: Schema.Number,
  stderr: Schema.String,
  lines: Schema.Array(Schema.String)
}) {}

const packageName = "@anthropic-ai/claude-code"

/**
 * The path of the installed CLI executable (`bin/claude.exe` of the package).
 *
 * @since 0.0.0
 */
export const executable: Effect.Effect<string, ClaudeCliNotFound> = Effect.gen(function*() {
  const packageJson = yield* Effect.try({
    try: () => createRequire(import.meta.url).resolve(`${packageName}/package.json`),
    catch: () => new ClaudeCliNotFound({ message: `${packageName} is not installed (npm install ${packageName})` })
  })
  const fs = yield* FileSystem.FileSystem
  const path = Path.join(Path.dirname(packageJson), "bin", "claude.exe")
  const exists = yield* Effect.orElseSucceed(fs.exists(path), () => false)
  if (!exists) {
    return yield* new ClaudeCliNotFound({
      message: `${packageName} is installed but ${path} is missing (its postinstall may not have run)`
    })
  }
  return path
}).pipe(Effect.provide(NodeFileSystem.layer))

/**
 * The CLI options of the NDJSON bus: stream-json in both directions.
 *
 * @since 0.0.0
 */
export const streamJsonArgs: ReadonlyArray<string> = StreamJson.busArgs

/**
 * Options that keep a test run lean: `--bare` skips hooks, plugins, LSP,
 * CLAUDE.md discovery and the messaging socket, and offers only Bash, Edit
 * and Read, which makes a one-turn run about a third faster. Its Bash has
 * no `run_in_background` parameter: runs that need background tasks must
 * leave it out.
 *
 * @since 0.0.0
 */
export const leanArgs: ReadonlyArray<string> = ["--bare"]

/**
 * The environment a run needs to stay offline and hermetic: the model server,
 * a dummy API key, a private config directory, and every kind of
 * non-essential traffic (telemetry, error reporting, auto-update, bootstrap
 * and catalog fetches) turned off. `tmpDir` (TMPDIR) moves the CLI's own temp
 * files and messaging socket out of the shared `/tmp`. `home` (default
 * `tmpDir`) becomes HOME: the CLI's Bash tool snapshots the user's shell rc
 * files, and a host's rc (a version manager that takes a lock, say) must not
 * stall every tool call of a test.
 *
 * @since 0.0.0
 */
export const offlineEnv = (options: {
  readonly baseUrl: string
  readonly configDir: string
  readonly tmpDir?: string | undefined
  readonly home?: string | undefined
  readonly apiKey?: string | undefined
}): Record<string, string> => ({
  ANTHROPIC_BASE_URL: options.baseUrl,
  ANTHROPIC_API_KEY: options.apiKey ?? "sk-ant-skein-offline-dummy",
  CLAUDE_CONFIG_DIR: options.configDir,
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  DISABLE_AUTOUPDATER: "1",
  DISABLE_TELEMETRY: "1",
  DISABLE_ERROR_REPORTING: "1",
  ...(options.tmpDir === undefined ? {} : { TMPDIR: options.tmpDir }),
  ...homeOf(options)
})

const homeOf = (options: { readonly tmpDir?: string | undefined; readonly home?: string | undefined }) => {
  const home = options.home ?? options.tmpDir
  return home === undefined ? {} : { HOME: home }
}

/**
 * The folders an offline run needs, under one temp root that is removed when
 * the scope closes: a private `CLAUDE_CONFIG_DIR`, a working directory, and a
 * `TMPDIR` that keeps the CLI's sockets and task files out of the shared `/tmp`.
 *
 * @since 0.0.0
 */
export interface OfflineDirs {
  readonly root: string
  readonly configDir: string
  readonly cwd: string
  readonly tmpDir: string
}

/**
 * @since 0.0.0
 */
export const offlineDirs = (prefix = "skein-claude-"): Effect.Effect<OfflineDirs, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync((): OfflineDirs => {
      const root = NodeFs.mkdtempSync(Path.join(Os.tmpdir(), prefix))
      const make = (name: string) => {
        const dir = Path.join(root, name)
        NodeFs.mkdirSync(dir)
        return dir
      }
      return { root, configDir: make("config"), cwd: make("cwd"), tmpDir: make("tmp") }
    }),
    (dirs) => Effect.sync(() => NodeFs.rmSync(dirs.root, { recursive: true, force: true }))
  )

/** Variables of the parent that would steer the CLI elsewhere (real keys, a parent session). */
const isInheritable = (name: string) =>
  !name.startsWith("ANTHROPIC_") && !name.startsWith("CLAUDE") && !name.startsWith("OTEL_")

const inheritedEnv = (): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && isInheritable(name)) env[name] = value
  }
  return env
}

/**
 * `offlineEnv` for a child whose environment is merged over this process's
 * (ProcessHost's default, and so a Session's): every inherited variable that
 * would steer the CLI elsewhere (a real key, a parent session) is unset.
 *
 * @since 0.0.0
 */
export const isolatedEnv = (options: Parameters<typeof offlineEnv>[0]): Record<string, string | undefined> => {
  const env: Record<string, string | undefined> = {}
  for (const name of Object.keys(process.env)) {
    if (!isInheritable(name)) env[name] = undefined
  }
  return { ...env, ...offlineEnv(options) }
}

/**
 * @since 0.0.0
 */
export interface SpawnOptions {
  /** The model server, e.g. a FakeModel's `url`. */
  readonly baseUrl: string
  /** CLI arguments (no shell is involved). */
  readonly args: ReadonlyArray<string>
  /** Added to (and overriding) the offline environment. */
  readonly env?: Readonly<Record<string, string>> | undefined
  /** Another release to run (see `CliRelease.install`); the pinned `executable` if omitted. */
  readonly release?: { readonly command: string; readonly args: ReadonlyArray<string> } | undefined
}

/**
 * A running CLI process.
 *
 * @since 0.0.0
 */
export interface Run {
  readonly pid: number
  /** The temporary CLAUDE_CONFIG_DIR; sessions live under `projects/`. */
  readonly configDir: string
  /** The temporary working directory. */
  readonly cwd: string
  /** Raw stdout bytes. Single consumer: read it once. */
  readonly stdout: Stream.Stream<Uint8Array>
  /** Everything written to stderr so far (it is always drained, so the CLI never blocks on it). */
  readonly stderr: Effect.Effect<string>
  readonly write: (data: string | Uint8Array) => Effect.Effect<void, ClaudeCliStdinError>
  /** Writes one NDJSON line. */
  readonly send: (message: unknown) => Effect.Effect<void, ClaudeCliStdinError>
  readonly closeStdin: Effect.Effect<void>
  /** Waits for exit; a death by signal is reported as 128 + the signal number. */
  readonly exitCode: Effect.Effect<number>
}

const signalCode = (signal: NodeJS.Signals | null): number =>
  signal === null ? 1 : 128 + (Os.constants.signals[signal] ?? 0)

/**
 * Spawns the CLI in a fresh temp config dir, cwd and TMPDIR, all removed when
 * the scope closes. When the scope closes, the CLI's process group gets
 * SIGKILL, and so does every process that inherited the run's marker
 * variable: the CLI runs Bash commands in sessions of their own, which a
 * group kill does not reach.
 *
 * @since 0.0.0
 */
export const spawn: (
  options: SpawnOptions
) => Effect.Effect<Run, ClaudeCliNotFound | ClaudeCliSpawnError, Scope.Scope> = Effect.fn("ClaudeCli.spawn")(function*(
  options: SpawnOptions
) {
  const command = options.release === undefined ? yield* executable : options.release.command
  const prefixArgs = options.release?.args ?? []
  const fs = yield* FileSystem.FileSystem
  const root = yield* Effect.orDie(fs.makeTempDirectoryScoped({ prefix: "skein-claude-" }))
  const configDir = Path.join(root, "config")
  const cwd = Path.join(root, "cwd")
  const tmpDir = Path.join(root, "tmp")
  for (const dir of [configDir, cwd, tmpDir]) {
    yield* Effect.orDie(fs.makeDirectory(dir))
  }
  const marker = Path.basename(root)
  const env = {
    ...inheritedEnv(),
    ...offlineEnv({ baseUrl: options.baseUrl, configDir, tmpDir }),
    ...options.env,
    [ProcessTree.markerVariable]: marker
  }

  const exited = yield* Deferred.make<number>()
  const child = yield* Effect.acquireRelease(
    Effect.async<ChildProcess.ChildProcessWithoutNullStreams, ClaudeCliSpawnError>((resume) => {
      const child = ChildProcess.spawn(command, [...prefixArgs, ...options.args], {
        cwd,
        env,
        detached: true,
        stdio: ["pipe", "pipe", "pipe"]
      })
      child.once("exit", (code, signal) => Deferred.unsafeDone(exited, Effect.succeed(code ?? signalCode(signal))))
      child.once("spawn", () => resume(Effect.succeed(child)))
      child.once("error", (error) => resume(Effect.fail(new ClaudeCliSpawnError({ message: String(error) }))))
    }),
    (child) =>
      Effect.gen(function*() {
        if (child.pid !== undefined) yield* ProcessTree.killAll(child.pid, marker)
        yield* Deferred.await(exited)
      })
  )
  // A failed write raises 'error' on stdin; writes report it through their callbacks.
  child.stdin.on("error", () => {})

  let stderr = ""
  child.stderr.setEncoding("utf8")
  child.stderr.on("data", (text: string) => {
    stderr += text
  })

  const write = (data: string | Uint8Array) =>
    Effect.async<void, ClaudeCliStdinError>((resume) => {
      if (!child.stdin.writable) {
        return resume(Effect.fail(new ClaudeCliStdinError({ message: "stdin is closed" })))
      }
      child.stdin.write(data, (error) =>
        resume(error ? Effect.fail(new ClaudeCliStdinError({ message: String(error) })) : Effect.void))
    })

  return {
    pid: child.pid ?? -1,
    configDir,
    cwd,
    stdout: Stream.orDie(NodeStream.fromReadable(() => child.stdout, (error) => error)),
    stderr: Effect.sync(() => stderr),
    write,
    send: (message: unknown) => write(`${JSON.stringify(message)}\n`),
    closeStdin: Effect.async<void>((resume) => {
      if (child.stdin.writableEnded) return resume(Effect.void)
      child.stdin.end(() => resume(Effect.void))
    }),
    exitCode: Deferred.await(exited)
  }
}, Effect.provide(NodeFileSystem.layer))

/**
 * Splits raw bytes into lines, decoding UTF-8 across chunk borders.
 *
 * @since 0.0.0
 */
export const lines = <E, R>(bytes: Stream.Stream<Uint8Array, E, R>): Stream.Stream<string, E, R> =>
  bytes.pipe(Stream.decodeText(), Stream.splitLines)

/**
 * A user turn on the stream-json bus.
 *
 * @since 0.0.0
 */
export const userMessage = (content: string) => ({
  type: "user",
  message: { role: "user", content }
})

/**
 * @since 0.0.0
 */
export interface TurnResult {
  readonly run: Run
  /** stdout split into lines, exactly as printed. */
  readonly lines: ReadonlyArray<string>
  /** stdout, byte for byte. */
  readonly stdout: Uint8Array
  readonly stderr: string
  readonly exitCode: number
}

const isResultLine = (line: string): boolean => {
  try {
    const value: unknown = JSON.parse(line)
    return typeof value === "object" && value !== null && "type" in value && value.type === "result"
  } catch {
    return false
  }
}

const concatBytes = (chunks: Chunk.Chunk<Uint8Array>): Uint8Array => {
  const all = new Uint8Array(Chunk.reduce(chunks, 0, (n, chunk) => n + chunk.length))
  let offset = 0
  for (const chunk of chunks) {
    all.set(chunk, offset)
    offset += chunk.length
  }
  return all
}

/**
 * Runs one turn on the stream-json bus: sends `prompt` as a user message,
 * reads stdout until the `result` message, closes stdin and waits for exit.
 * `args` defaults to `leanArgs` and follows the stream-json options; `release`
 * runs another release (the 2.0 line has no `--bare`: pass other `args`).
 *
 * @since 0.0.0
 */
export const runTurn = Effect.fn("ClaudeCli.runTurn")(function*(options: {
  readonly baseUrl: string
  readonly prompt: string
  readonly args?: ReadonlyArray<string> | undefined
  readonly env?: Readonly<Record<string, string>> | undefined
  readonly release?: SpawnOptions["release"]
}): Effect.fn.Return<
  TurnResult,
  ClaudeCliNotFound | ClaudeCliSpawnError | ClaudeCliStdinError | ClaudeCliNoResult,
  Scope.Scope
> {
  const run = yield* spawn({
    baseUrl: options.baseUrl,
    args: [...streamJsonArgs, ...(options.args ?? leanArgs)],
    env: options.env,
    release: options.release
  })
  yield* run.send(userMessage(options.prompt))
  const chunks = yield* Ref.make(Chunk.empty<Uint8Array>())
  // Read up to the result line, close stdin so the CLI exits, and drain the rest.
  yield* run.stdout.pipe(
    Stream.tap((chunk) => Ref.update(chunks, Chunk.append(chunk))),
    lines,
    Stream.runForEach((line) => isResultLine(line) ? run.closeStdin : Effect.void)
  )
  const bytes = concatBytes(yield* Ref.get(chunks))
  const exitCode = yield* run.exitCode
  const stderr = yield* run.stderr
  const text = new TextDecoder().decode(bytes)
  const all = text.split("\n").filter((line) => line.length > 0)
  if (!all.some(isResultLine)) {
    return yield* new ClaudeCliNoResult({ exitCode, stderr, lines: all })
  }
  return { run, lines: all, stdout: bytes, stderr, exitCode }
})
