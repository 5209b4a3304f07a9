/**
 * FakeCli: a scripted stand-in for the Claude Code CLI, run as a real child
 * process, for the faults the real CLI will not produce on demand (malformed
 * lines, crashes mid-turn, ignored SIGTERM, cancelled requests).
 *
 * The test side builds a {@link Script} with the constructors below and
 * spawns {@link command}; the child (`bin/fake-cli.ts`) decodes the script
 * from `SKEIN_FAKE_CLI_SCRIPT` and plays it step by step. It accepts and
 * ignores every argument, so it can be spawned with the real CLI's flags.
 *
 * Unless an {@link AutoAnswer} step turns it off, the child answers the
 * host's `control_request` `initialize` and `interrupt` with a success
 * `control_response`, as soon as it reads them, as the real CLI does. Those
 * answers are whole lines written between steps' writes, so one can land
 * inside a partial line a `Raw` step left open.
 *
 * @since 0.0.0
 */
import { StreamJson } from "@skein/protocol"
import { Schema } from "effect"
import { fileURLToPath } from "node:url"
import * as Messages from "./internal/cliMessages.js"
import * as TsChild from "./TsChild.js"

/** Env var holding the script: inline JSON, or the path of a JSON file. */
export const ScriptEnv = "SKEIN_FAKE_CLI_SCRIPT"

export const Signal = Schema.Literal(
  "SIGTERM",
  "SIGKILL",
  "SIGINT",
  "SIGHUP",
  "SIGQUIT",
  "SIGABRT",
  "SIGSEGV",
  "SIGPIPE",
  "SIGUSR1",
  "SIGUSR2"
)
export type Signal = typeof Signal.Type

// ---------------------------------------------------------------------------
// Steps
// ---------------------------------------------------------------------------

/** Write bytes to stdout exactly as given: no newline is added. */
export class Raw extends Schema.TaggedClass<Raw>()("Raw", {
  data: Schema.String,
  encoding: Schema.Literal("utf8", "base64")
}) {}

/** Write one JSON message followed by a newline. */
export class Emit extends Schema.TaggedClass<Emit>()("Emit", {
  message: Schema.Unknown
}) {}

/**
 * Write a line of exactly `bytes` bytes (newline not counted). With `json`,
 * the line is a valid JSON object of an unknown type, padded to size.
 */
export class Huge extends Schema.TaggedClass<Huge>()("Huge", {
  bytes: Schema.Int.pipe(Schema.nonNegative()),
  json: Schema.Boolean
}) {}

/**
 * Wait until a stdin message matches. `subtype` matches `request.subtype`
 * for a `control_request`, `response.subtype` for a `control_response`, else
 * the message's own `subtype`. `requestId` matches `request_id` at the top or
 * inside `response`. Messages read earlier and not yet matched count too.
 * `echo` writes the matched line back to stdout; `record` appends it to a file.
 * If stdin ends first, the child exits 0, as the real CLI does.
 */
export class Await extends Schema.TaggedClass<Await>()("Await", {
  type: Schema.String,
  subtype: Schema.optional(Schema.String),
  requestId: Schema.optional(Schema.String),
  echo: Schema.optional(Schema.Boolean),
  record: Schema.optional(Schema.String)
}) {}

/** Wait for stdin to end. */
export class AwaitEnd extends Schema.TaggedClass<AwaitEnd>()("AwaitEnd", {}) {}

export class Sleep extends Schema.TaggedClass<Sleep>()("Sleep", {
  millis: Schema.Int.pipe(Schema.nonNegative())
}) {}

export class Exit extends Schema.TaggedClass<Exit>()("Exit", {
  code: Schema.Int.pipe(Schema.between(0, 255))
}) {}

/** Send `signal` to itself, then go on with the script if it survives. */
export class Kill extends Schema.TaggedClass<Kill>()("Kill", {
  signal: Signal
}) {}

/** Never finish: the process stays up until it is killed. */
export class Hang extends Schema.TaggedClass<Hang>()("Hang", {}) {}

/**
 * Install a handler that does nothing for `signal`. On each delivery the
 * child writes `fake-cli: ignored <signal>` to stderr, so a test can tell the
 * signal arrived.
 */
export class IgnoreSignal extends Schema.TaggedClass<IgnoreSignal>()("IgnoreSignal", {
  signal: Signal
}) {}

export class Stderr extends Schema.TaggedClass<Stderr>()("Stderr", {
  text: Schema.String
}) {}

/**
 * From here on, answer (or not) the host's `initialize` and `interrupt` as
 * they are read. Put it first to cover the whole run. An unanswered request
 * still reaches `Await` steps.
 */
export class AutoAnswer extends Schema.TaggedClass<AutoAnswer>()("AutoAnswer", {
  initialize: Schema.Boolean,
  interrupt: Schema.Boolean
}) {}

/**
 * From here on, the end of stdin no longer ends the process: an `Await` that
 * stdin's end would release waits forever instead.
 */
export class IgnoreStdinEnd extends Schema.TaggedClass<IgnoreStdinEnd>()("IgnoreStdinEnd", {}) {}

/**
 * Start a `sleep` of `millis` that inherits stdout and stderr and outlives
 * the child: the pipe stays open after the child exits. It stays in the
 * child's process group unless `ownGroup`, when a group kill misses it.
 * Writes `fake-cli: holder pid <pid>` to stderr.
 */
export class HoldStdout extends Schema.TaggedClass<HoldStdout>()("HoldStdout", {
  millis: Schema.Int.pipe(Schema.positive()),
  ownGroup: Schema.Boolean
}) {}

export const Step = Schema.Union(
  Raw,
  Emit,
  Huge,
  Await,
  AwaitEnd,
  Sleep,
  Exit,
  Kill,
  Hang,
  IgnoreSignal,
  Stderr,
  AutoAnswer,
  IgnoreStdinEnd,
  HoldStdout
)
export type Step = typeof Step.Type

/** Steps run in order; when they run out the child exits 0. */
export const Script = Schema.Array(Step)
export type Script = typeof Script.Type

export const ScriptFromJson = Schema.parseJson(Script)
export const encodeScript = Schema.encodeSync(ScriptFromJson)
export const decodeScript = Schema.decodeUnknown(ScriptFromJson)

// ---------------------------------------------------------------------------
// Step constructors
// ---------------------------------------------------------------------------

/** Text or bytes, written as is. */
export const raw = (data: string | Uint8Array): Raw =>
  typeof data === "string"
    ? new Raw({ data, encoding: "utf8" })
    : new Raw({ data: Buffer.from(data).toString("base64"), encoding: "base64" })

/** `text` plus a newline, written as is (need not be JSON). */
export const line = (text: string): Raw => raw(`${text}\n`)

export const emit = (message: unknown): Emit => new Emit({ message })

export const huge = (bytes: number, options?: { readonly json?: boolean }): Huge =>
  new Huge({ bytes, json: options?.json ?? true })

export const waitFor = (
  type: string,
  options?: {
    readonly subtype?: string
    readonly requestId?: string
    readonly echo?: boolean
    readonly record?: string
  }
): Await => new Await({ type, ...options })

export const waitForEnd: AwaitEnd = new AwaitEnd()

export const sleep = (millis: number): Sleep => new Sleep({ millis })

export const exit = (code: number): Exit => new Exit({ code })

export const kill = (signal: Signal): Kill => new Kill({ signal })

export const hangForever: Hang = new Hang()

export const ignoreSignal = (signal: Signal): IgnoreSignal => new IgnoreSignal({ signal })

export const stderr = (text: string): Stderr => new Stderr({ text })

/** Which of `initialize` and `interrupt` to answer from here on; each defaults to `true`. */
export const autoAnswer = (options: { readonly initialize?: boolean; readonly interrupt?: boolean }): AutoAnswer =>
  new AutoAnswer({ initialize: options.initialize ?? true, interrupt: options.interrupt ?? true })

export const ignoreStdinEnd: IgnoreStdinEnd = new IgnoreStdinEnd()

export const holdStdout = (millis: number, options?: { readonly ownGroup?: boolean }): HoldStdout =>
  new HoldStdout({ millis, ownGroup: options?.ownGroup ?? false })

// ---------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------

export interface ScenarioOptions {
  readonly sessionId?: string
  readonly cwd?: string
}

const defaultSessionId = "5e55a1d0-0000-4000-8000-000000000001"

const ids = (options?: ScenarioOptions) => Messages.makeIds(options?.sessionId ?? defaultSessionId)

/** Start of a turn: wait for the host's user message, then system/init. */
const turnStart = (id: Messages.Ids, options?: ScenarioOptions): Script => [
  waitFor("user"),
  emit(Messages.systemInit(id, options?.cwd ?? "/tmp/fake-cli"))
]

/**
 * One ordinary turn: wait for the host's user message, then system/init,
 * `running`, the steps of `during` (if any), an assistant text, a success
 * `result` and `idle`. Scripts may chain several; the process goes on with
 * whatever steps follow.
 */
export const textTurn = (
  text: string,
  options?: ScenarioOptions & { readonly during?: Script }
): Script => {
  const id = ids(options)
  return [
    ...turnStart(id, options),
    emit(Messages.sessionStateChanged(id, "running")),
    ...(options?.during ?? []),
    emit(Messages.assistantText(id, text)),
    emit(Messages.result(id, { subtype: "success", result: text, numTurns: 1, durationMs: 400, costUsd: 0.001 })),
    emit(Messages.sessionStateChanged(id, "idle"))
  ]
}

/**
 * Garbage between good lines: invalid JSON, a line that is not an object, an
 * unknown message type, invalid UTF-8, a blank line, and a final partial line
 * with no newline. Then the process exits 0.
 */
export const malformedLines = (options?: ScenarioOptions): Script => {
  const id = ids(options)
  return [
    emit(Messages.systemInit(id, options?.cwd ?? "/tmp/fake-cli")),
    line("{\"type\":\"assistant\",\"message\":"),
    line("not json at all"),
    line("[1,2,3]"),
    emit({ type: "fake_unknown_type", session_id: id.sessionId, uuid: id.uuid() }),
    raw(Uint8Array.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d, 0x0a])),
    line(""),
    emit(Messages.assistantText(id, "still here")),
    raw("{\"type\":\"result\",\"subtype\":\"succ")
  ]
}

/**
 * A turn that dies half-way: after the user message, system/init and a tool
 * call, the process exits with `code` or kills itself with `signal`.
 */
export const crashMidTurn = (
  how: { readonly code: number } | { readonly signal: Signal },
  options?: ScenarioOptions
): Script => {
  const id = ids(options)
  return [
    ...turnStart(id, options),
    emit(Messages.assistantToolUse(id, "toolu_fake_crash", "Bash", { command: "make", description: "Build" })),
    stderr("fake-cli: crashing mid-turn\n"),
    "code" in how ? exit(how.code) : kill(how.signal)
  ]
}

/** system/init, then nothing ever again; SIGTERM still kills it. */
export const hang = (options?: ScenarioOptions): Script => {
  const id = ids(options)
  return [emit(Messages.systemInit(id, options?.cwd ?? "/tmp/fake-cli")), hangForever]
}

/** Ignores SIGTERM from the start, emits system/init, then hangs: only SIGKILL ends it. */
export const ignoresSigterm = (options?: ScenarioOptions): Script => {
  const id = ids(options)
  return [ignoreSignal("SIGTERM"), emit(Messages.systemInit(id, options?.cwd ?? "/tmp/fake-cli")), hangForever]
}

/**
 * A turn that asks the host for permission (`can_use_tool`) and then withdraws
 * the request with `control_cancel_request` before any answer is awaited,
 * then ends the turn with an error result. The process stays up until stdin
 * ends.
 */
export const permissionThenCancel = (
  options?: ScenarioOptions & { readonly requestId?: string; readonly cancelAfterMillis?: number }
): Script => {
  const id = ids(options)
  const requestId = options?.requestId ?? "req_fake_perm_1"
  const toolUseId = "toolu_fake_perm_1"
  const input = { command: "rm -rf build", description: "Clean the build folder" }
  return [
    ...turnStart(id, options),
    emit(Messages.assistantToolUse(id, toolUseId, "Bash", input)),
    emit(Messages.sessionStateChanged(id, "requires_action")),
    emit(Messages.canUseTool(requestId, toolUseId, "Bash", input)),
    sleep(options?.cancelAfterMillis ?? 0),
    emit(Messages.controlCancel(requestId)),
    emit(Messages.userToolResult(id, toolUseId, "The permission request was cancelled.", true)),
    emit(Messages.result(id, {
      subtype: "error_during_execution",
      result: "permission request cancelled",
      numTurns: 1,
      durationMs: 850,
      costUsd: 0.0021
    })),
    emit(Messages.sessionStateChanged(id, "idle")),
    waitForEnd
  ]
}

/**
 * A turn that starts a background agent. The first `result` comes while the
 * task still runs; the task's `task_notification` then starts a follow-up
 * turn with a second `result`, and only then `session_state_changed idle`.
 * The process stays up until stdin ends.
 */
export const backgroundTaskWithLateResult = (
  options?: ScenarioOptions & { readonly taskMillis?: number }
): Script => {
  const id = ids(options)
  const taskId = "a3k9x2m7q"
  const toolUseId = "toolu_fake_task_1"
  const prompt = "Find every TODO in the repository"
  return [
    ...turnStart(id, options),
    emit(Messages.sessionStateChanged(id, "running")),
    emit(Messages.assistantToolUse(id, toolUseId, "Task", {
      description: "Find TODOs",
      prompt,
      subagent_type: "general-purpose",
      run_in_background: true
    })),
    emit(Messages.taskStarted(id, taskId, toolUseId, "Find TODOs", prompt)),
    emit(Messages.userToolResult(id, toolUseId, `Async agent launched. agentId: ${taskId}`, false)),
    emit(Messages.assistantText(id, "I started a background agent to look for TODOs.")),
    emit(Messages.result(id, {
      subtype: "success",
      result: "I started a background agent to look for TODOs.",
      numTurns: 2,
      durationMs: 1420,
      costUsd: 0.0042
    })),
    sleep(options?.taskMillis ?? 0),
    emit(Messages.taskNotification(id, taskId, toolUseId, "Found 3 TODOs", `/tmp/fake-cli/tasks/${taskId}.output`)),
    emit(Messages.assistantText(id, "The background agent found 3 TODOs.")),
    emit(Messages.result(id, {
      subtype: "success",
      result: "The background agent found 3 TODOs.",
      numTurns: 1,
      durationMs: 910,
      costUsd: 0.0018
    })),
    emit(Messages.sessionStateChanged(id, "idle")),
    waitForEnd
  ]
}

/**
 * A turn that starts and never ends, and an `interrupt` that is never
 * answered: after the user message, system/init, `running` and one assistant
 * text, the process only waits for stdin to end, then exits 0. `initialize`
 * is still answered.
 */
export const ignoresInterrupt = (options?: ScenarioOptions): Script => {
  const id = ids(options)
  return [
    autoAnswer({ interrupt: false }),
    ...turnStart(id, options),
    emit(Messages.sessionStateChanged(id, "running")),
    emit(Messages.assistantText(id, "Working on it, this will take a while.")),
    waitForEnd
  ]
}

/**
 * A CLI that ignores everything once its turn runs: it never answers
 * `interrupt`, ignores SIGTERM, SIGINT and SIGHUP, and keeps running after
 * stdin ends. Only SIGKILL ends it. `initialize` is still answered.
 */
export const ignoresEverything = (options?: ScenarioOptions): Script => {
  const id = ids(options)
  return [
    autoAnswer({ interrupt: false }),
    ignoreSignal("SIGTERM"),
    ignoreSignal("SIGINT"),
    ignoreSignal("SIGHUP"),
    ignoreStdinEnd,
    ...turnStart(id, options),
    emit(Messages.sessionStateChanged(id, "running")),
    emit(Messages.assistantText(id, "Working on it, this will take a while.")),
    hangForever
  ]
}

/**
 * The leader exits mid-turn while a descendant still holds stdout: after the
 * user message, system/init and `running`, it starts a holder (see
 * {@link HoldStdout}) of `holdMillis` (default 30 s), writes `stderrText` and
 * exits with `code` (default 3). stdout reaches EOF only when the holder ends.
 */
export const leaderExitsHoldingStdout = (
  options?: ScenarioOptions & {
    readonly code?: number
    readonly stderrText?: string
    readonly holdMillis?: number
    readonly ownGroup?: boolean
  }
): Script => {
  const id = ids(options)
  return [
    ...turnStart(id, options),
    emit(Messages.sessionStateChanged(id, "running")),
    holdStdout(options?.holdMillis ?? 30_000, { ownGroup: options?.ownGroup ?? false }),
    stderr(options?.stderrText ?? "fake-cli: leader exiting, a descendant keeps stdout open\n"),
    exit(options?.code ?? 3)
  ]
}

/**
 * Writes `stderrText` and exits with `code` (default 1) before it answers or
 * reads anything: a wrong flag or a wrong CLI version.
 */
export const exitsAtOnce = (options?: { readonly code?: number; readonly stderrText?: string }): Script => [
  autoAnswer({ initialize: false, interrupt: false }),
  stderr(options?.stderrText ?? "error: unknown option '--fake-flag'\n"),
  exit(options?.code ?? 1)
]

// ---------------------------------------------------------------------------
// The 2.0 line: no session_state_changed, no task_* events
// ---------------------------------------------------------------------------

/**
 * One ordinary turn as CLI 2.0.76 prints it: after the user message,
 * system/init (of 2.0.76), the steps of `during`, an assistant text and a
 * success `result`, and no `session_state_changed` at all. Chain several;
 * the process goes on with whatever steps follow.
 */
export const legacyTextTurn = (
  text: string,
  options?: ScenarioOptions & { readonly during?: Script }
): Script => {
  const id = ids(options)
  return [
    waitFor("user"),
    emit(Messages.legacySystemInit(id, options?.cwd ?? "/tmp/fake-cli")),
    ...(options?.during ?? []),
    emit(Messages.assistantText(id, text)),
    emit(Messages.legacyResult(id, { result: text, numTurns: 1, durationMs: 207, costUsd: 0.0577 }))
  ]
}

/**
 * A turn with a permission ask as CLI 2.0.76 prints it: assistant text, a
 * Bash tool_use, the `can_use_tool` control_request (no `requires_action`
 * before it), then, once the host's control_response to `requestId` arrives
 * (recorded to `record` if given), the tool_result, an assistant text and a
 * success `result`. The fake does not read the answer: the tool "runs" either
 * way. Chain further steps after it.
 */
export const legacyPermissionTurn = (
  options?: ScenarioOptions & { readonly requestId?: string; readonly record?: string }
): Script => {
  const id = ids(options)
  const requestId = options?.requestId ?? "req_fake_perm_legacy_1"
  const toolUseId = "toolu_fake_perm_legacy_1"
  const input = { command: "touch skein.txt && echo created", description: "Create a file" }
  return [
    waitFor("user"),
    emit(Messages.legacySystemInit(id, options?.cwd ?? "/tmp/fake-cli")),
    emit(Messages.assistantText(id, "I'll run a command.")),
    emit(Messages.assistantToolUse(id, toolUseId, "Bash", input)),
    emit(Messages.legacyCanUseTool(requestId, toolUseId, "Bash", input)),
    waitFor("control_response", { requestId, ...(options?.record === undefined ? {} : { record: options.record }) }),
    emit(Messages.bashResult(id, toolUseId, "created")),
    emit(Messages.assistantText(id, "Created skein.txt.")),
    emit(Messages.legacyResult(id, { result: "Created skein.txt.", numTurns: 2, durationMs: 825, costUsd: 0.1145 }))
  ]
}

// ---------------------------------------------------------------------------
// Background tasks and CLI-initiated turns (shapes of CLI 2.1.332)
// ---------------------------------------------------------------------------

const bashTask = (taskId: string, n: number): Messages.BashTask => ({
  taskId,
  runId: `0mx2vcdw${n}-dc1e01db`,
  toolUseId: `toolu_fake_bg_${n}`,
  description: "Start the dev server"
})

/** The turn that starts `task` with `run_in_background`, up to its `result` and `idle`. */
const backgroundStartTurn = (id: Messages.Ids, task: Messages.BashTask, command: string, options?: ScenarioOptions) => {
  const text = "The dev server is running in the background."
  return [
    waitFor("user"),
    emit(Messages.sessionStateChanged(id, "running")),
    emit(Messages.systemInit(id, options?.cwd ?? "/tmp/fake-cli")),
    emit(Messages.assistantToolUse(id, task.toolUseId, "Bash", {
      command,
      description: task.description,
      run_in_background: true
    })),
    emit(Messages.backgroundTasksChanged(id, [task])),
    emit(Messages.bashTaskStarted(id, task)),
    emit(Messages.bashBackgroundResult(id, task)),
    emit(Messages.assistantText(id, text)),
    emit(Messages.result(id, { subtype: "success", result: text, numTurns: 2, durationMs: 1420, costUsd: 0.0995 })),
    emit(Messages.sessionStateChanged(id, "idle"))
  ]
}

/**
 * A turn that starts a background Bash task (`taskId`, default `b7devsrv1`)
 * that never ends: `background_tasks_changed` and `task_started`, the
 * tool_result, an assistant text, the turn's `result` and `idle` while the
 * task runs, and then never a `task_updated` or `task_notification`. The
 * process stays up until stdin ends.
 */
export const backgroundTaskNeverEnds = (options?: ScenarioOptions & { readonly taskId?: string }): Script => {
  const id = ids(options)
  return [...backgroundStartTurn(id, bashTask(options?.taskId ?? "b7devsrv1", 1), "npm run dev", options), waitForEnd]
}

/**
 * A follow-up turn the CLI starts on its own, which asks for a permission.
 * The first turn starts a background Bash task and ends (`result`, `idle`).
 * `delayMillis` later (default 200) the task completes: `task_updated`,
 * `task_notification`, `background_tasks_changed` with no tasks, `running`,
 * system/init, assistant text and a Bash tool_use, `requires_action` and a
 * `can_use_tool` for `requestId`. Once the host's control_response to it
 * arrives (recorded to `record` if given): `running`, the tool_result, an
 * assistant text, `result` and `idle`. The process stays up until stdin ends.
 */
export const cliInitiatedPermission = (
  options?: ScenarioOptions & {
    readonly delayMillis?: number
    readonly requestId?: string
    readonly record?: string
  }
): Script => {
  const id = ids(options)
  const task = bashTask("b7build01", 2)
  const requestId = options?.requestId ?? "req_fake_followup_perm_1"
  const toolUseId = "toolu_fake_followup_1"
  const input = { command: "touch built.txt && echo deployed", description: "Mark the build deployed" }
  const text = "The build finished; I marked it deployed."
  return [
    ...backgroundStartTurn(id, task, "sleep 1; echo build done", options),
    sleep(options?.delayMillis ?? 200),
    emit(Messages.bashTaskUpdated(id, task, "completed")),
    emit(Messages.bashTaskNotification(id, task)),
    emit(Messages.backgroundTasksChanged(id, [])),
    emit(Messages.sessionStateChanged(id, "running")),
    emit(Messages.systemInit(id, options?.cwd ?? "/tmp/fake-cli")),
    emit(Messages.assistantText(id, "The build is done. I'll mark it deployed.")),
    emit(Messages.assistantToolUse(id, toolUseId, "Bash", input)),
    emit(Messages.sessionStateChanged(id, "requires_action")),
    emit(Messages.canUseTool(requestId, toolUseId, "Bash", input)),
    waitFor("control_response", { requestId, ...(options?.record === undefined ? {} : { record: options.record }) }),
    emit(Messages.sessionStateChanged(id, "running")),
    emit(Messages.bashResult(id, toolUseId, "deployed")),
    emit(Messages.assistantText(id, text)),
    emit(Messages.result(id, { subtype: "success", result: text, numTurns: 2, durationMs: 980, costUsd: 0.1505 })),
    emit(Messages.sessionStateChanged(id, "idle")),
    waitForEnd
  ]
}

// ---------------------------------------------------------------------------
// Spawning
// ---------------------------------------------------------------------------

/** The flags a host passes to the real CLI; the fake ignores them. */
export const defaultCliArgs: ReadonlyArray<string> = StreamJson.busArgs

export interface Command {
  readonly command: string
  readonly args: ReadonlyArray<string>
  /** Only the variables the fake needs: merge them over the parent environment. */
  readonly env: Readonly<Record<string, string>>
}

/** Path of the child's entry point: next to this module, as TypeScript in sources, as JavaScript in dist/. */
export const binPath: string = fileURLToPath(
  new URL(import.meta.url.endsWith(".ts") ? "./bin/fake-cli.ts" : "./bin/fake-cli.js", import.meta.url)
)

/** The `node` arguments that start the child, before the CLI flags. */
export const entryArgs = (runner: TsChild.Runner = "bundle"): ReadonlyArray<string> => TsChild.nodeArgs(binPath, runner)

/**
 * The command line to spawn the fake with `script`. `script` may also be a
 * string: inline JSON, or the path of a JSON file (use a file past ~100 KB of
 * script: Linux caps one environment string at 128 KiB). `cliArgs` go after
 * the entry point and are ignored by the child.
 */
export const command = (
  script: Script | string,
  options?: { readonly cliArgs?: ReadonlyArray<string>; readonly runner?: TsChild.Runner }
): Command => ({
  command: process.execPath,
  args: [...entryArgs(options?.runner), ...(options?.cliArgs ?? defaultCliArgs)],
  env: { [ScriptEnv]: typeof script === "string" ? script : encodeScript(script) }
})
