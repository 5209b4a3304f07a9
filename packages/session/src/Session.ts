/**
 * One Claude Code process as a supervised session.
 *
 * The session owns the CLI's process (through ProcessHost) and composes the
 * units that drive it, each in its own file under `internal/`:
 * - `reader`: the one reader of stdout, which also races the process exit;
 * - `turns` over `turnTracker`: where turns begin and end;
 * - `controlChannel`: the host's requests to the CLI and their answers;
 * - `cliRequests`: the CLI's requests to the host (permissions, hooks, …);
 * - `watchdog`: the silence bound.
 * All of them live in the Scope that `start` runs in: closing it interrupts a
 * live turn (for a bounded time), closes stdin and lets ProcessHost escalate,
 * and fails whatever is still pending.
 */
import { ProcessHost, TaskManager } from "@skein/kernel"
import { type Anthropic, type CliMessage, type Control, HostMessage, type Json } from "@skein/protocol"
import type { EventLog } from "@skein/store"
import {
  Deferred,
  Duration,
  Effect,
  Option,
  type Queue,
  Ref,
  type Schema,
  Scope,
  type Subscribable
} from "effect"
import { Elicitation } from "./Elicitation.js"
import { Hooks } from "./Hooks.js"
import type * as Args from "./internal/args.js"
import * as CliRequests from "./internal/cliRequests.js"
import * as ControlChannel from "./internal/controlChannel.js"
import * as Dispatch from "./internal/dispatch.js"
import * as LazyHub from "./internal/lazyHub.js"
import * as Launch from "./internal/launch.js"
import * as Paths from "./internal/paths.js"
import * as Reader from "./internal/reader.js"
import * as StateCell from "./internal/stateCell.js"
import * as Trace from "./internal/trace.js"
import * as Turns from "./internal/turns.js"
import * as Watchdog from "./internal/watchdog.js"
import { Permissions } from "./Permissions.js"
import { CliExited, type RequestError, ResumeMismatch, SessionClosed, SessionSilent, type TurnError } from "./SessionError.js"
import { SessionPool } from "./SessionPool.js"
import * as SessionState from "./SessionState.js"
import { Toolkits } from "./Toolkit.js"
import { decodeStructuredOutput, type SessionEvent, type Turn } from "./Turn.js"

/** CLI flags (`model`, `resume`, `allowedTools`, …) plus how and where the process runs. */
export interface SessionOptions extends Args.FlagOptions {
  readonly cwd: string
  /** The CLI to run; by default the installed `@anthropic-ai/claude-code`, else `claude` on PATH. */
  readonly executable?: string | undefined
  /** Arguments placed before the CLI's own (e.g. a script for an interpreter). */
  readonly executableArgs?: ReadonlyArray<string> | undefined
  readonly env?: Readonly<Record<string, string | undefined>> | undefined
  /** `merge` (default) layers `env` over the host's environment; `replace` uses `env` alone. */
  readonly envMode?: "merge" | "replace" | undefined
  /** Sets `CLAUDE_CONFIG_DIR`, where the CLI keeps its transcripts. */
  readonly configDir?: string | undefined
  /** Default timeout of host → CLI control requests; none by default. */
  readonly requestTimeout?: Duration.DurationInput | undefined
  /**
   * Fail the session when the CLI says nothing (not even keep_alive) for this
   * long while a turn or a request waits on it. Off by default.
   */
  readonly silenceTimeout?: Duration.DurationInput | undefined
  /** How long an interrupted turn may take to reach the CLI's end of work before it is resolved anyway. Default 10 s. */
  readonly interruptSettle?: Duration.DurationInput | undefined
  /** After a turn's background task ends while idle, how long to wait for its follow-up. Default 2 s. */
  readonly taskSettle?: Duration.DurationInput | undefined
  /**
   * How long a turn waits for the background tasks it started, once the CLI
   * is otherwise done. The turn then ends and lists them (`liveTasks`); their
   * follow-up becomes a turn of its own. Default 10 minutes.
   */
  readonly backgroundWait?: Duration.DurationInput | "forever" | undefined
  /** After the CLI exits, how long stdout (held open by a descendant, say) may still be read. Default 1 s. */
  readonly exitDrain?: Duration.DurationInput | undefined
  readonly stopTimeouts?: Partial<ProcessHost.StopTimeouts> | undefined
  /**
   * The runtime's own record: every event is appended (see `eventRecord`)
   * before it is published, so what subscribers saw survives a crash.
   */
  readonly eventLog?: EventLog.EventLog<Json.JsonObject> | undefined
  /** Replaces the CLI's system prompt (sent in `initialize`); `appendSystemPrompt` adds to it instead. */
  readonly systemPrompt?: string | ReadonlyArray<string> | undefined
  /** Custom subagents by name, sent in `initialize`; the CLI lists them in `init`. */
  readonly agents?: Readonly<Record<string, Control.AgentDefinition>> | undefined
  /**
   * Structured output: its JSON Schema goes to the CLI (`jsonSchema`), which
   * makes the model answer through a `StructuredOutput` tool; each turn's
   * summary then carries the output decoded by this schema (`Turn.structuredOutput`).
   */
  readonly outputSchema?: Schema.Schema.AnyNoContext | undefined
}

/** The `initialize` request: hooks, the host's toolkits, and the options only it carries. */
export const initializeRequest = Launch.initializeRequest

/**
 * How an event is kept in the event log: a message or an unknown message as
 * the JSON the CLI printed, a diagnostic under the type `skein_diagnostic`.
 * Replaying a record through `CliMessage.decoder.decodeJson` gives the event back.
 */
export const eventRecord = (event: SessionEvent): Json.JsonObject => {
  switch (event._tag) {
    case "Message":
      return { ...event.message }
    case "Unknown":
      return event.json
    default:
      return { type: "skein_diagnostic", diagnostic: { ...event } }
  }
}

export interface SendOptions {
  readonly uuid?: string | undefined
}

export interface Session {
  readonly pid: number
  /**
   * The CLI's session id, at once for a new session (the host chooses it and
   * passes `--session-id`, or takes the `sessionId` option) and for a plain
   * resume by id (see `knownSessionId`). A fork, a `continue` or a resume by
   * path learn theirs from `system/init`, which arrives with the first turn:
   * then this waits for it (or fails with why the session ended). Once
   * `init` came, its id is the answer. `state`'s `sessionId` is the id the
   * CLI reported: until then, the CLI may not have written a transcript to
   * resume.
   */
  readonly sessionId: Effect.Effect<string, TurnError>
  readonly state: Subscribable.Subscribable<SessionState.SessionState>
  /** Every decoded message and diagnostic from the moment of subscription on. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<SessionEvent>, never, Scope.Scope>
  /** Every turn from the moment of subscription on: those `send` began, and those the CLI began by itself. */
  readonly turns: Effect.Effect<Queue.Dequeue<Turn>, never, Scope.Scope>
  /**
   * The `initialize` response (commands, models, account). `start` does not
   * wait for it: a request that carries options (hooks, toolkits, system
   * prompt, agents, output schema) is written first, and the CLI reads stdin
   * in order; one that carries none is sent on the first use of this.
   */
  readonly initialize: Effect.Effect<Json.JsonObject | undefined, RequestError>
  /**
   * Queue a user message; turns run one at a time, in order, each written
   * only when the CLI is idle. Fails with why the session ended (`CliExited`, …) once it has.
   */
  /**
   * Queues a turn. With `uuid`, the user message carries it, and the CLI keeps
   * it as its transcript entry's: a host can name the message before it is written.
   */
  readonly send: (content: string | ReadonlyArray<Anthropic.ContentBlock>, options?: SendOptions) => Effect.Effect<Turn, TurnError>
  /** Send a control request and wait for its response; a caller that stops waiting withdraws it. */
  readonly request: (
    payload: Control.HostRequestPayload,
    options?: { readonly timeout?: Duration.DurationInput | undefined }
  ) => Effect.Effect<Json.JsonObject | undefined, RequestError>
  /** Interrupts the live turn, which then resolves as interrupted. */
  readonly interrupt: Effect.Effect<void, RequestError>
  readonly setPermissionMode: (mode: string) => Effect.Effect<void, RequestError>
  readonly setModel: (model: string | null) => Effect.Effect<void, RequestError>
  readonly setMaxThinkingTokens: (tokens: number | null) => Effect.Effect<void, RequestError>
  readonly stopTask: (taskId: string) => Effect.Effect<void, RequestError>
  readonly mcpStatus: Effect.Effect<Json.JsonObject | undefined, RequestError>
  readonly getContextUsage: Effect.Effect<Json.JsonObject | undefined, RequestError>
  /** Closes stdin: the CLI finishes its work and exits. */
  readonly end: Effect.Effect<void>
  /** Waits for the CLI to exit. */
  readonly exit: Effect.Effect<ProcessHost.ExitStatus>
}

/** Longest wait for the CLI to confirm an interrupt while the session closes. */
const closeInterruptWait = Duration.seconds(1)

const millisOf = (d: Duration.DurationInput | undefined) => d === undefined ? undefined : Duration.toMillis(Duration.decode(d))

/**
 * The session id a start with these options will have, when they tell it: a
 * plain `--resume <id>` continues that session; a fork, a resume by path and
 * a new session learn theirs from `init`.
 */
export const knownSessionId = (options: Pick<SessionOptions, "resume" | "forkSession">): Option.Option<string> =>
  options.resume !== undefined && options.forkSession !== true && !options.resume.endsWith(".jsonl")
    ? Option.some(options.resume)
    : Option.none()

/** Fails at once when `--resume` names a transcript the CLI would not find. */
const checkResume = (options: SessionOptions) =>
  Effect.gen(function*() {
    const resume = options.resume
    if (resume === undefined) return
    const root = Paths.configRoot(options)
    if (yield* Paths.resumable(root, resume)) return
    return yield* new ResumeMismatch({ expected: resume, actual: null, reason: `no transcript for ${resume} under ${root}/projects` })
  })

/**
 * Starts the CLI and initializes the control protocol. Permission, hook and
 * elicitation requests go to the services in context, when provided. With a
 * `SessionPool` in context, a process it keeps warm for these options is
 * taken instead of a new one.
 */
export const start = Effect.fn("Session.start", {
  // The span's stack trace would be kept, with the Errors it is built from, by every fiber the session forks.
  captureStackTrace: false
})(function*(options: SessionOptions) {
  const services: CliRequests.Services = {
    permissions: yield* Effect.serviceOption(Permissions),
    hooks: yield* Effect.serviceOption(Hooks),
    elicitation: yield* Effect.serviceOption(Elicitation),
    toolkits: yield* Effect.serviceOption(Toolkits)
  }
  yield* checkResume(options)
  if (Option.isSome(services.hooks) && services.hooks.value.registrations.length > 0 && options.bare === true) {
    yield* Effect.logWarning("Session: --bare skips hooks; the registered hooks will not be called")
  }
  const initialize = initializeRequest(options, CliRequests.initializeFields(services))
  const pool = yield* Effect.serviceOption(SessionPool)
  const warm = Option.isSome(pool) ? yield* pool.value.take(options, initialize) : Option.none()
  const launched = Option.isSome(warm) ? warm.value : yield* Launch.cold(options)
  return yield* runOn(launched, options, services, initialize)
})

/** The turn tracker's timings, from the session's options. */
const trackerOptions = (options: SessionOptions) => ({
  backgroundWaitMillis: options.backgroundWait === "forever" ? "forever" as const : millisOf(options.backgroundWait),
  interruptSettleMillis: millisOf(options.interruptSettle),
  followUpSettleMillis: millisOf(options.taskSettle)
})

/** What `system/init` settles: the session id, the trace's CLI facts, the transcript's path. */
const recordInit = (context: {
  readonly options: SessionOptions
  readonly root: string
  readonly sessionId: Deferred.Deferred<string, TurnError>
  readonly state: StateCell.StateCell<SessionState.SessionState>
  readonly trace: Trace.SessionTrace
}) =>
(message: CliMessage.Init) =>
  Effect.gen(function*() {
    const { options, state } = context
    yield* Deferred.succeed(context.sessionId, message.session_id)
    yield* context.trace.onInit(message)
    const resumed = knownSessionId(options)
    if (Option.isSome(resumed) && resumed.value !== message.session_id) {
      yield* Effect.logWarning(`Session: resumed ${resumed.value}, but the CLI reports ${message.session_id}`)
    }
    const transcriptPath = Paths.transcriptPath(context.root, message.cwd, message.session_id)
    yield* state.update((s) => ({ ...s, transcriptPath }))
  })

/** Whether `initialize` carries anything beyond its subtype: then the first turn depends on it. */
const carriesOptions = (payload: Control.Initialize) => Object.keys(payload).some((key) => key !== "subtype")

/** The session over a launched CLI: every unit wired to its bus, in the current Scope. */
const runOn = Effect.fnUntraced(function*(
  launched: Launch.Launched,
  options: SessionOptions,
  services: CliRequests.Services,
  initializePayload: Control.Initialize
) {
  const { child } = launched
  const taskManager = yield* Effect.serviceOption(TaskManager.TaskManager)
  const scope = yield* Effect.scope
  const root = Paths.configRoot(options)

  // A resumed CLI prints `init` only with its first turn; its id is known before that.
  const known = knownSessionId(options)
  // The id the launch told the CLI to use; `init` confirms it (a stand-in CLI may not, and then `init` wins).
  const chosen = Option.orElse(known, () => launched.sessionId)
  const state = yield* StateCell.make<SessionState.SessionState>({
    // A plain resume continues the same session; a fork starts a child of it.
    ...SessionState.initial({ cwd: options.cwd, parentSessionId: options.forkSession === true ? options.resume : undefined }),
    pid: child.pid
  })
  const events = LazyHub.make<SessionEvent>()
  const sessionId = yield* Deferred.make<string, TurnError>()
  if (Option.isSome(known)) yield* Deferred.succeed(sessionId, known.value)
  const ended = yield* Deferred.make<TurnError>()
  // Why the session ended, set in the same step as `ended`: read synchronously by a send.
  let endedError: Option.Option<TurnError> = Option.none()
  const hostClosedStdin = yield* Ref.make(false)
  const endedWith = Effect.sync(() => endedError)
  // Made when first needed (most sessions need it once, at their close): an error captures a stack
  // trace, which an idle session would hold for nothing. It has no fields to check: no Schema validation.
  let closedError: SessionClosed | undefined
  const closed = () => closedError ??= new SessionClosed({}, { disableValidation: true })
  const exitDrain = options.exitDrain ?? Duration.seconds(1)
  const trace = yield* Trace.make({ cwd: options.cwd, pid: child.pid, resume: options.resume })

  // One message is one write to the pipe, and the pipe keeps the order of writes: no lock is needed to keep lines whole.
  const write = (message: HostMessage.HostMessage) => child.write(HostMessage.encode(message))
  /**
   * Why a write found stdin closed: the host closed it, or the CLI is gone —
   * then its exit, which the reader reports within `exitDrain`, is the answer.
   */
  const whyClosed: Effect.Effect<TurnError> = Effect.flatMap(
    Ref.get(hostClosedStdin),
    (byHost) =>
      byHost ? Effect.sync(closed) : Deferred.await(ended).pipe(
        Effect.timeoutTo({ duration: Duration.sum(exitDrain, Duration.seconds(1)), onSuccess: (e) => e, onTimeout: closed })
      )
  )

  const control = ControlChannel.make({
    write,
    closedError: whyClosed,
    ended: endedWith,
    defaultTimeout: options.requestTimeout,
    scope,
    trace
  })
  const requests = yield* CliRequests.make({ services, state, write, trace })
  const turns = yield* Turns.make({
    tracker: trackerOptions(options),
    writeUser: (content, uuid) => write(HostMessage.user(content, uuid === undefined ? undefined : { uuid })),
    cost: () => state.unsafeGet().counters.costUsd,
    ended: () => endedError,
    structuredOutput: options.outputSchema === undefined ? undefined : decodeStructuredOutput(options.outputSchema),
    trace
  })

  const dispatch = Dispatch.make({
    routeOf: Dispatch.routeOf({ control, requests, trace, onInit: recordInit({ options, root, sessionId, state, trace }), taskManager }),
    onEvents: turns.onEvents
  })

  /** Everything pending fails with `error`; nothing is left waiting. */
  const shutdown = (error: TurnError) =>
    Effect.gen(function*() {
      if (Option.isSome(endedError)) return
      endedError = Option.some(error)
      yield* Deferred.succeed(ended, error)
      yield* Deferred.fail(sessionId, error)
      yield* control.failAll(error)
      yield* turns.failAll(error)
      yield* requests.clear
    })

  yield* Reader.run({
    child,
    stdout: launched.stdout,
    state,
    events,
    eventLog: options.eventLog,
    record: eventRecord,
    dispatch,
    drainGrace: exitDrain
  }).pipe(
    Effect.flatMap((status) => shutdown(new CliExited({ code: status.code, signal: status.signal, stderrTail: status.stderrTail }))),
    Effect.forkIn(scope)
  )

  if (options.silenceTimeout !== undefined) {
    yield* Watchdog.run({
      limit: options.silenceTimeout,
      lastSeenAt: Effect.sync(() => state.unsafeGet().lastSeenAt),
      waiting: Effect.all([turns.busy, control.pending, requests.inFlight]).pipe(
        Effect.map(([busy, pending, inFlight]) => (busy || pending > 0) && inFlight === 0)
      ),
      onSilent: (silentMillis) => Effect.zipRight(shutdown(new SessionSilent({ silentMillis })), child.kill("SIGKILL"))
    }).pipe(Effect.forkIn(scope))
  }

  // `Scope.addFinalizer`, not `Effect.addFinalizer`: that one keeps a snapshot of this fiber's
  // FiberRefs for the session's whole life, to run the finalizer with them, which closing never needs.
  yield* Scope.addFinalizer(
    scope,
    Effect.suspend(() =>
      closeGracefully({ options, turns, control, ended: endedWith, closeStdin: Effect.zipRight(Ref.set(hostClosedStdin, true), child.closeStdin) })
        .pipe(Effect.zipRight(shutdown(closed())))
    )
  )

  // One that carries something (hooks, toolkits, prompts, agents, a schema)
  // is written before any user message, and the CLI reads stdin in order: the
  // first turn need not wait for the answer (that would cost a round trip).
  // An empty one changes nothing the CLI does, so it is sent when someone
  // asks for the answer: building its answer (commands, models, account;
  // 17 KB) would hold the first turn. A warm process has answered already.
  const answer: Effect.Effect<Json.JsonObject | undefined, RequestError> = Option.isSome(launched.initialized)
    ? launched.initialized.value
    : carriesOptions(initializePayload)
    ? yield* control.submit(initializePayload)
    : control.request(initializePayload)
  const initialize = yield* Effect.cached(answer)

  return make({ child, state, events, sessionId, chosen, initialize, turns, control, end: Ref.set(hostClosedStdin, true) })
})

/**
 * The first half of closing: ask the CLI to interrupt a live turn — bounded,
 * since the CLI may never answer and a finalizer cannot be interrupted from
 * outside — then close stdin. ProcessHost's own finalizer escalates to signals.
 */
const closeGracefully = (parts: {
  readonly options: SessionOptions
  readonly turns: Turns.Turns
  readonly control: ControlChannel.ControlChannel
  readonly ended: Effect.Effect<Option.Option<TurnError>>
  readonly closeStdin: Effect.Effect<void>
}) =>
  Effect.gen(function*() {
    const stdinGrace = parts.options.stopTimeouts?.stdinGrace ?? ProcessHost.defaultStopTimeouts.stdinGrace
    if ((yield* parts.turns.busy) && Option.isNone(yield* parts.ended)) {
      yield* parts.control.request({ subtype: "interrupt" }).pipe(
        Effect.interruptible,
        Effect.timeout(Duration.min(closeInterruptWait, Duration.decode(stdinGrace))),
        Effect.ignore
      )
    }
    yield* parts.closeStdin
  })

/** `init`'s id once it came, else the id chosen at start, else a wait for `init`. */
const currentSessionId = (
  reported: Deferred.Deferred<string, TurnError>,
  chosen: Option.Option<string>
): Effect.Effect<string, TurnError> =>
  Option.isNone(chosen) ? Deferred.await(reported) : Effect.flatMap(Deferred.poll(reported), (done) =>
    Option.isSome(done)
      ? Effect.orElse(done.value, () => Effect.succeed(chosen.value))
      : Effect.succeed(chosen.value))

/**
 * The public face of a started session. Its effects that take no arguments
 * are getters, made when asked for: an idle session then holds no prebuilt
 * effect trees for requests it may never make.
 */
const make = (parts: {
  readonly child: ProcessHost.ChildProcess
  readonly state: StateCell.StateCell<SessionState.SessionState>
  readonly events: LazyHub.LazyHub<SessionEvent>
  readonly sessionId: Deferred.Deferred<string, TurnError>
  readonly chosen: Option.Option<string>
  readonly initialize: Effect.Effect<Json.JsonObject | undefined, RequestError>
  readonly turns: Turns.Turns
  readonly control: ControlChannel.ControlChannel
  readonly end: Effect.Effect<void>
}): Session => {
  const { child, control, state, turns } = parts
  const request = control.request
  return {
    pid: child.pid,
    get sessionId() {
      return currentSessionId(parts.sessionId, parts.chosen)
    },
    state,
    get subscribe() {
      return parts.events.subscribe
    },
    turns: turns.subscribe,
    initialize: parts.initialize,
    send: (content, options) => turns.send(content, options?.uuid),
    request,
    get interrupt() {
      return turns.interrupt.pipe(
        Effect.flatMap((live) => live ? Effect.asVoid(request({ subtype: "interrupt" })) : Effect.void),
        Effect.withSpan("Session.interrupt", { captureStackTrace: false })
      )
    },
    setPermissionMode: (mode) =>
      request({ subtype: "set_permission_mode", mode }).pipe(
        Effect.zipRight(state.update((s) => ({ ...s, permissionMode: mode })))
      ),
    setModel: (model) =>
      request({ subtype: "set_model", model }).pipe(
        // The CLI answers with the model it actually chose: it maps aliases and falls back on names it does not know.
        Effect.flatMap((response) => {
          const chosen = response?.["model"]
          return state.update((s) => ({ ...s, model: typeof chosen === "string" ? chosen : model ?? s.model }))
        })
      ),
    setMaxThinkingTokens: (tokens) => Effect.asVoid(request({ subtype: "set_max_thinking_tokens", max_thinking_tokens: tokens })),
    stopTask: (taskId) => Effect.asVoid(request({ subtype: "stop_task", task_id: taskId })),
    get mcpStatus() {
      return request({ subtype: "mcp_status" })
    },
    get getContextUsage() {
      return request({ subtype: "get_context_usage" })
    },
    get end() {
      return Effect.zipRight(parts.end, child.closeStdin)
    },
    // ProcessHost's own wait: it resolves even after the session's scope closed.
    exit: child.await
  }
}

/** The transcript path the CLI uses for a session under a config root. */
export const transcriptPath = Paths.transcriptPath
