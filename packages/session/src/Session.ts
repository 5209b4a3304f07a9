/**
 * One Claude Code process as a supervised session.
 *
 * The session owns the CLI's process (through ProcessHost), one reader fiber
 * that decodes its stdout in order, a turn actor that sends user messages one
 * at a time and waits for each turn's authoritative end, and a fiber per
 * request the CLI makes of the host. All of them live in the Scope that
 * `start` runs in: closing it interrupts a live turn, closes stdin and lets
 * ProcessHost escalate, and fails whatever is still pending.
 */
import { Actor, ProcessHost, Task, TaskManager } from "@skein/kernel"
import { type Anthropic, type CliMessage, Control, HostMessage, type Json, StreamJson } from "@skein/protocol"
import { type EventLog, TranscriptLayout } from "@skein/store"
import {
  Cause,
  Clock,
  Deferred,
  Duration,
  Effect,
  Exit,
  FiberMap,
  Mailbox,
  Option,
  PubSub,
  Queue,
  Ref,
  Schema,
  type Scope,
  Stream,
  type Subscribable,
  SubscriptionRef
} from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { Elicitation } from "./Elicitation.js"
import { Hooks } from "./Hooks.js"
import * as Args from "./internal/args.js"
import * as Executable from "./internal/executable.js"
import { defaultTimeout as defaultPermissionTimeout, deny, type PermissionDecision, Permissions } from "./Permissions.js"
import {
  CliExited,
  ControlError,
  ControlTimeout,
  type RequestError,
  ResumeMismatch,
  SessionClosed,
  SessionSilent,
  SpawnFailed,
  type TurnError
} from "./SessionError.js"
import * as SessionState from "./SessionState.js"
import { type SessionEvent, summarize, type Turn, type TurnSummary } from "./Turn.js"

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
  /** Fail the session when the CLI says nothing (not even keep_alive) for this long. Off by default. */
  readonly silenceTimeout?: Duration.DurationInput | undefined
  /** How long an interrupted turn may take to reach `idle` before it is resolved anyway. Default 10 s. */
  readonly interruptSettle?: Duration.DurationInput | undefined
  /** After the last background task ends while idle, how long to wait for the follow-up turn. Default 2 s. */
  readonly taskSettle?: Duration.DurationInput | undefined
  readonly stopTimeouts?: Partial<ProcessHost.StopTimeouts> | undefined
  /**
   * The runtime's own record: every event is appended (see `eventRecord`)
   * before it is published, so what subscribers saw survives a crash.
   */
  readonly eventLog?: EventLog.EventLog<Json.JsonObject> | undefined
}

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

export interface Session {
  readonly pid: number
  /** The CLI's session id, from `system/init` (which arrives with the first turn). */
  readonly sessionId: Effect.Effect<string, TurnError>
  readonly state: Subscribable.Subscribable<SessionState.SessionState>
  /** Every decoded message and diagnostic from the moment of subscription on. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<SessionEvent>, never, Scope.Scope>
  /**
   * The `initialize` response (commands, models, account). `start` does not
   * wait for it: the request is written first, and the CLI reads stdin in order.
   */
  readonly initialize: Effect.Effect<Json.JsonObject | undefined, RequestError>
  /** Queue a user message; turns run one at a time, in order. */
  /** Fails with why the session ended (`CliExited`, …) once it has. */
  readonly send: (content: string | ReadonlyArray<Anthropic.ContentBlock>) => Effect.Effect<Turn, TurnError>
  /** Send a control request and wait for its response. */
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

/** What the turn loop learns from the bus. */
type Signal =
  | { readonly _tag: "Running" }
  | { readonly _tag: "Idle" }
  | { readonly _tag: "Tasks"; readonly live: number }
  | { readonly _tag: "Result"; readonly result: CliMessage.Result }
  | { readonly _tag: "Interrupted" }
  | { readonly _tag: "Ended"; readonly error: TurnError }

interface ActiveTurn {
  readonly index: number
  readonly content: string | ReadonlyArray<Anthropic.ContentBlock>
  readonly events: Mailbox.Mailbox<SessionEvent, TurnError>
  readonly done: Deferred.Deferred<TurnSummary, TurnError>
}

const noPermissionHandler =
  "This host has no permission handler, so tool use that needs approval is denied. Configure a Permissions service to allow it."

const unsupported = (subtype: string) => `unsupported_request: this host does not handle ${subtype}`

const isTaskType = Schema.is(Task.TaskType)

let requestCounter = 0
const nextRequestId = (prefix: string) => `${prefix}_${++requestCounter}_${Math.random().toString(36).slice(2, 10)}`

/** The CLI's config root for a session: where it keeps its transcripts. */
const configRoot = (options: SessionOptions): string =>
  options.configDir ?? options.env?.CLAUDE_CONFIG_DIR ??
    (options.envMode === "replace" ? undefined : process.env.CLAUDE_CONFIG_DIR) ??
    Path.join(Os.homedir(), ".claude")

/**
 * Whether `--resume <resume>` can find its transcript: a path, or an id the
 * CLI looks up in every project folder of the root (it resumes across cwds).
 */
const resumable = (root: string, resume: string): Effect.Effect<boolean> =>
  Effect.sync(() => {
    if (resume.endsWith(TranscriptLayout.transcriptExtension)) return Fs.existsSync(resume)
    const projects = TranscriptLayout.projectsDir(root)
    try {
      return Fs.readdirSync(projects).some((dir) => Fs.existsSync(Path.join(projects, dir, `${resume}${TranscriptLayout.transcriptExtension}`)))
    } catch {
      return false
    }
  })

/**
 * Starts the CLI and initializes the control protocol. Permission, hook and
 * elicitation requests go to the services in context, when provided.
 */
export const start = Effect.fn("Session.start")(function*(options: SessionOptions) {
  const host = yield* ProcessHost.ProcessHost
  const permissions = yield* Effect.serviceOption(Permissions)
  const hooks = yield* Effect.serviceOption(Hooks)
  const elicitation = yield* Effect.serviceOption(Elicitation)
  const taskManager = yield* Effect.serviceOption(TaskManager.TaskManager)
  const scope = yield* Effect.scope

  const configDir = options.configDir
  const root = configRoot(options)
  if (options.resume !== undefined && !(yield* resumable(root, options.resume))) {
    return yield* new ResumeMismatch({
      expected: options.resume,
      actual: null,
      reason: `no transcript for ${options.resume} under ${TranscriptLayout.projectsDir(root)}`
    })
  }
  if (Option.isSome(hooks) && hooks.value.registrations.length > 0 && options.bare === true) {
    yield* Effect.logWarning("Session: --bare skips hooks; the registered hooks will not be called")
  }

  const command = options.executable ?? (yield* Executable.resolve)
  const args = Args.build({ ...options, permissionPromptTool: options.permissionPromptTool ?? Option.isSome(permissions) })
  const child = yield* host.spawn({
    command,
    args: [...(options.executableArgs ?? []), ...args],
    cwd: options.cwd,
    env: {
      ...options.env,
      CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS: "1",
      ...(configDir === undefined ? {} : { CLAUDE_CONFIG_DIR: configDir })
    },
    envMode: options.envMode,
    stopTimeouts: options.stopTimeouts,
    label: `claude ${options.resume ?? ""}`.trim()
  }).pipe(Effect.mapError((e) => new SpawnFailed({ command: e.command, reason: e.reason })))

  // A plain resume continues the same session; a fork starts a child of it.
  const parentSessionId = options.forkSession === true ? options.resume : undefined
  const state = yield* SubscriptionRef.make<SessionState.SessionState>({
    ...SessionState.initial({ cwd: options.cwd, parentSessionId }),
    pid: child.pid
  })
  const events = yield* PubSub.unbounded<SessionEvent>()
  const pending = new Map<string, { readonly subtype: string; readonly deferred: Deferred.Deferred<Json.JsonObject | undefined, RequestError> }>()
  const handlers = yield* FiberMap.make<string>()
  const writeLock = yield* Effect.makeSemaphore(1)
  const sessionId = yield* Deferred.make<string, TurnError>()
  const ended = yield* Deferred.make<TurnError>()
  const signals = yield* Queue.unbounded<Signal>()
  const current = yield* Ref.make(Option.none<ActiveTurn>())
  const interruptRequested = yield* Ref.make(false)
  const hookHandlers = new Map<string, NonNullable<Hooks["Type"]["registrations"][number]>>()
  let turnCount = 0
  /** Turns sent and not yet finished, queued ones included: all fail if the session ends. */
  const open = new Set<ActiveTurn>()
  const startedAt = yield* Clock.currentTimeMillis

  const closed = new SessionClosed()
  const endedError = Deferred.poll(ended).pipe(
    Effect.flatMap(Option.match({ onNone: () => Effect.succeed(closed), onSome: (e) => e }))
  )

  const write = (message: HostMessage.HostMessage) =>
    writeLock.withPermits(1)(child.write(HostMessage.encode(message))).pipe(
      Effect.catchTag("StdinClosed", () => Effect.flatMap(endedError, Effect.fail))
    )

  // --- host → CLI requests ---------------------------------------------------

  /** Writes a request now; the returned effect waits for its answer (or its timeout). */
  const submit = (payload: Control.HostRequestPayload, opts?: { readonly timeout?: Duration.DurationInput | undefined }) =>
    Effect.gen(function*() {
      const end = yield* Deferred.poll(ended)
      if (Option.isSome(end)) return yield* Effect.flatMap(end.value, Effect.fail)
      const requestId = nextRequestId("req")
      const deferred = yield* Deferred.make<Json.JsonObject | undefined, RequestError>()
      pending.set(requestId, { subtype: payload.subtype, deferred })
      const timeout = opts?.timeout ?? options.requestTimeout
      const withdraw = (millis: number) =>
        Effect.gen(function*() {
          pending.delete(requestId)
          yield* write(Control.cancel(requestId)).pipe(Effect.ignore)
          return yield* new ControlTimeout({ subtype: payload.subtype, requestId, timeoutMillis: millis })
        })
      yield* write(Control.request(requestId, payload))
      if (timeout === undefined) return Deferred.await(deferred)
      return Deferred.await(deferred).pipe(
        Effect.timeoutOption(timeout),
        Effect.flatMap(Option.match({
          onNone: () => withdraw(Duration.toMillis(Duration.decode(timeout))),
          onSome: Effect.succeed
        }))
      )
    })

  const request = (payload: Control.HostRequestPayload, opts?: { readonly timeout?: Duration.DurationInput | undefined }) =>
    Effect.flatten(submit(payload, opts)).pipe(
      Effect.withSpan("Session.request", { attributes: { subtype: payload.subtype } })
    )

  const onResponse = (message: Control.ControlResponse) =>
    Effect.suspend(() => {
      const entry = pending.get(message.response.request_id)
      if (entry === undefined) return Effect.void
      pending.delete(message.response.request_id)
      return message.response.subtype === "success"
        ? Deferred.succeed(entry.deferred, message.response.response)
        : Deferred.fail(
          entry.deferred,
          new ControlError({ subtype: entry.subtype, requestId: message.response.request_id, error: message.response.error })
        )
    })

  // --- CLI → host requests ---------------------------------------------------

  const answer = (requestId: string, effect: Effect.Effect<Json.JsonObject>) =>
    effect.pipe(
      Effect.flatMap((response) => write(Control.success(requestId, response))),
      Effect.catchAllCause((cause) =>
        Cause.isInterruptedOnly(cause)
          ? Effect.void
          : write(Control.error(requestId, Cause.pretty(cause))).pipe(Effect.ignore)
      ),
      Effect.ignore
    )

  const decide = (requestId: string, request: Control.CanUseTool): Effect.Effect<PermissionDecision> =>
    Option.match(permissions, {
      onNone: () => Effect.succeed(deny(noPermissionHandler)),
      onSome: (policy) => {
        const timeout = policy.timeout ?? defaultPermissionTimeout
        return Effect.flatMap(SubscriptionRef.get(state), (s) =>
          policy.canUseTool({
            sessionId: s.sessionId,
            requestId,
            toolName: request.tool_name,
            toolUseId: request.tool_use_id,
            input: request.input,
            request
          })).pipe(
            Effect.timeoutTo({
              duration: timeout,
              onSuccess: (decision) => decision,
              onTimeout: () =>
                deny(`The permission request for ${request.tool_name} timed out after ${Duration.format(timeout)}; denied.`)
            })
          )
      }
    })

  const onCanUseTool = (requestId: string, request: Control.CanUseTool) =>
    Effect.gen(function*() {
      yield* SubscriptionRef.update(state, (s) => ({
        ...s,
        pendingPermissions: [...s.pendingPermissions, {
          requestId,
          toolName: request.tool_name,
          toolUseId: request.tool_use_id,
          input: request.input
        }]
      }))
      const decision = yield* decide(requestId, request)
      // The CLI runs the tool with `updatedInput`; an allow without one means "as asked".
      return decision.behavior === "allow" && decision.updatedInput === undefined
        ? { ...decision, updatedInput: request.input }
        : { ...decision }
    }).pipe(
      Effect.ensuring(SubscriptionRef.update(state, (s) => ({
        ...s,
        pendingPermissions: s.pendingPermissions.filter((p) => p.requestId !== requestId)
      })))
    )

  const onHookCallback = (request: Control.HookCallback) =>
    Effect.suspend(() => {
      const registration = hookHandlers.get(request.callback_id)
      if (registration === undefined) return Effect.dieMessage(`no hook registered as ${request.callback_id}`)
      return SubscriptionRef.get(state).pipe(
        Effect.flatMap((s) => registration.handle(request.input, { sessionId: s.sessionId, toolUseId: request.tool_use_id })),
        Effect.map((output): Json.JsonObject => ({ ...output }))
      )
    })

  const onElicitation = (request: Control.Elicitation) =>
    Option.match(elicitation, {
      onNone: () => Effect.succeed<Control.ElicitationResult>({ action: "decline" }),
      onSome: (service) => service.elicit(request)
    }).pipe(Effect.map((result): Json.JsonObject => ({ ...result })))

  const onCliRequest = (message: Control.CliRequest) => {
    const requestId = message.request_id
    const request = message.request
    switch (request.subtype) {
      case "can_use_tool":
        return FiberMap.run(handlers, requestId, answer(requestId, onCanUseTool(requestId, request)))
      case "hook_callback":
        return FiberMap.run(handlers, requestId, answer(requestId, onHookCallback(request)))
      case "elicitation":
        return FiberMap.run(handlers, requestId, answer(requestId, onElicitation(request)))
      case "mcp_message":
      case "request_user_dialog":
        return write(Control.error(requestId, unsupported(request.subtype))).pipe(Effect.ignore)
    }
  }

  // --- the reader ------------------------------------------------------------

  const mirrorTask = (message: CliMessage.SystemMessage): Effect.Effect<void> =>
    Option.match(taskManager, {
      onNone: () => Effect.void,
      onSome: (tasks) => {
        switch (message.subtype) {
          case "task_started": {
            const type = message.task_type ?? "local_agent"
            if (!isTaskType(type)) return Effect.void
            return tasks.track(message.task_id, type, message.description, {
              status: "running",
              ...(message.tool_use_id === undefined ? {} : { toolUseId: message.tool_use_id })
            }).pipe(Effect.ignore)
          }
          case "task_updated": {
            const status = message.patch.status
            if (status !== "completed" && status !== "failed" && status !== "killed") return Effect.void
            return tasks.update(message.task_id, { status }).pipe(Effect.ignore)
          }
          default:
            return Effect.void
        }
      }
    })

  const route = (message: CliMessage.CliMessage): Effect.Effect<void> => {
    switch (message.type) {
      case "control_response":
        return onResponse(message)
      case "control_request":
        return onCliRequest(message)
      case "control_cancel_request":
        return FiberMap.remove(handlers, message.request_id)
      case "result":
        return Queue.offer(signals, { _tag: "Result", result: message })
      case "system":
        switch (message.subtype) {
          case "init":
            return Effect.gen(function*() {
              yield* Deferred.succeed(sessionId, message.session_id)
              const resumed = options.resume
              if (
                resumed !== undefined && options.forkSession !== true &&
                !resumed.endsWith(TranscriptLayout.transcriptExtension) && resumed !== message.session_id
              ) {
                yield* Effect.logWarning(`Session: resumed ${resumed}, but the CLI reports ${message.session_id}`)
              }
              const path = transcriptPath(root, message.cwd, message.session_id)
              yield* SubscriptionRef.update(state, (s) => ({ ...s, transcriptPath: path }))
            })
          case "session_state_changed":
            return message.state === "running"
              ? Queue.offer(signals, { _tag: "Running" })
              : message.state === "idle"
              ? Queue.offer(signals, { _tag: "Idle" })
              : Effect.void
          case "background_tasks_changed":
          case "task_started":
          case "task_updated":
          case "task_notification":
            return mirrorTask(message).pipe(
              Effect.zipRight(SubscriptionRef.get(state)),
              Effect.flatMap((s) => Queue.offer(signals, { _tag: "Tasks", live: s.backgroundTasks.length }))
            )
          default:
            return Effect.void
        }
      default:
        return Effect.void
    }
  }

  const onEvent = (event: SessionEvent) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      if (options.eventLog !== undefined) {
        yield* options.eventLog.append(eventRecord(event)).pipe(
          Effect.catchAll((error) => Effect.logWarning("Session: the event log refused an event", error))
        )
      }
      yield* PubSub.publish(events, event)
      // Answers to the host's own requests are plumbing, not part of any turn.
      const turn = yield* Ref.get(current)
      if (Option.isSome(turn) && !(event._tag === "Message" && event.message.type === "control_response")) {
        yield* turn.value.events.offer(event)
      }
      if (event._tag === "Message") {
        yield* SubscriptionRef.update(state, (s) => SessionState.apply(s, event.message, now))
        yield* route(event.message)
      } else {
        yield* SubscriptionRef.update(state, (s) => ({ ...s, lastSeenAt: now }))
        // A request of a kind this host does not know still gets an answer: the CLI waits for one.
        if (event._tag === "Unknown" && event.type === "control_request") {
          const requestId = event.json["request_id"]
          if (typeof requestId === "string") {
            yield* write(Control.error(requestId, unsupported(event.subtype ?? "an unknown request"))).pipe(Effect.ignore)
          }
        }
      }
    })

  /** Everything pending fails with `error`; nothing is left waiting. */
  const shutdown = (error: TurnError) =>
    Effect.gen(function*() {
      if (!(yield* Deferred.succeed(ended, error))) return
      yield* Deferred.fail(sessionId, error)
      for (const [, entry] of pending) yield* Deferred.fail(entry.deferred, error)
      pending.clear()
      for (const turn of open) yield* finish(turn, Exit.fail(error))
      yield* Queue.offer(signals, { _tag: "Ended", error })
      yield* FiberMap.clear(handlers)
    })

  yield* StreamJson.decodeStdout(child.stdout).pipe(
    Stream.runForEach(onEvent),
    Effect.zipRight(child.await),
    Effect.flatMap((status) =>
      Effect.gen(function*() {
        yield* SubscriptionRef.update(state, (s) => ({ ...s, status: "exited" as const }))
        yield* shutdown(new CliExited({ code: status.code, signal: status.signal, stderrTail: status.stderrTail }))
      })
    ),
    Effect.forkIn(scope)
  )

  if (options.silenceTimeout !== undefined) {
    const limit = Duration.toMillis(Duration.decode(options.silenceTimeout))
    yield* Effect.gen(function*() {
      while (true) {
        yield* Effect.sleep(Duration.millis(Math.max(1, limit / 4)))
        const now = yield* Clock.currentTimeMillis
        const s = yield* SubscriptionRef.get(state)
        const silent = now - Math.max(s.lastSeenAt, startedAt)
        if (s.status !== "exited" && silent > limit) {
          yield* shutdown(new SessionSilent({ silentMillis: silent }))
          yield* child.kill("SIGKILL")
          return
        }
      }
    }).pipe(Effect.forkIn(scope))
  }
  // --- turns -----------------------------------------------------------------

  const taskSettle = options.taskSettle ?? Duration.seconds(2)
  const interruptSettle = options.interruptSettle ?? Duration.seconds(10)

  const finish = (turn: ActiveTurn, exit: Exit.Exit<TurnSummary, TurnError>) =>
    Effect.gen(function*() {
      open.delete(turn)
      const active = yield* Ref.get(current)
      if (Option.isSome(active) && active.value === turn) yield* Ref.set(current, Option.none())
      if (exit._tag === "Success") {
        yield* turn.events.end
        yield* Deferred.succeed(turn.done, exit.value)
      } else {
        const failure = Option.getOrElse(Cause.failureOption(exit.cause), () => closed)
        yield* turn.events.fail(failure)
        yield* Deferred.fail(turn.done, failure)
      }
    })

  /** Sends the turn's message and waits for the end of its work. Never fails: the outcome goes to the turn. */
  const runTurn = (turn: ActiveTurn): Effect.Effect<void> =>
    Effect.gen(function*() {
      const end = yield* Deferred.poll(ended)
      if (Option.isSome(end)) return yield* Effect.flatMap(end.value, Effect.fail)
      // Never send into a turn the CLI started on its own: it would fold our message into it.
      yield* state.changes.pipe(Stream.takeUntil((s) => s.status !== "running"), Stream.runDrain)
      yield* Queue.takeAll(signals)
      yield* Ref.set(interruptRequested, false)
      const costBefore = (yield* SubscriptionRef.get(state)).counters.costUsd
      yield* Ref.set(current, Option.some(turn))
      yield* write(HostMessage.user(turn.content))
      const results: Array<CliMessage.Result> = []
      let started = false
      let idle = false
      let live = (yield* SubscriptionRef.get(state)).backgroundTasks.length
      let settling = false
      while (true) {
        const interrupted = yield* Ref.get(interruptRequested)
        const wait = interrupted ? interruptSettle : settling ? taskSettle : undefined
        const next = wait === undefined
          ? yield* Effect.map(Queue.take(signals), Option.some)
          : yield* Queue.take(signals).pipe(Effect.timeoutOption(wait))
        if (Option.isNone(next)) break // settled: the follow-up never came, or the interrupt never reached idle
        const signal = next.value
        if (signal._tag === "Ended") return yield* Effect.fail(signal.error)
        if (signal._tag === "Result") {
          // A result proves the turn ran, even if its `running` never came.
          results.push(signal.result)
          started = true
        }
        if (signal._tag === "Running") {
          started = true
          idle = false
          settling = false
        }
        if (signal._tag === "Tasks") {
          live = signal.live
          settling = started && idle && live === 0
        }
        if (signal._tag === "Idle" && started) {
          idle = true
          if (live === 0) break
        }
      }
      return summarize(results, { costBefore, interrupted: yield* Ref.get(interruptRequested) })
    }).pipe(Effect.exit, Effect.flatMap((exit) => finish(turn, exit)))

  const turns = yield* Actor.make<number, ActiveTurn, never, never>({
    name: "session-turns",
    initial: 0,
    handle: (n, turn) => Effect.as(runTurn(turn), n + 1)
  })

  const send = (content: string | ReadonlyArray<Anthropic.ContentBlock>) =>
    Effect.gen(function*() {
      const end = yield* Deferred.poll(ended)
      if (Option.isSome(end)) return yield* Effect.flatMap(end.value, Effect.fail)
      const turn: ActiveTurn = {
        index: ++turnCount,
        content,
        events: yield* Mailbox.make<SessionEvent, TurnError>(),
        done: yield* Deferred.make<TurnSummary, TurnError>()
      }
      open.add(turn)
      if (!(yield* turns.tell(turn))) {
        open.delete(turn)
        return yield* closed
      }
      return {
        index: turn.index,
        events: Mailbox.toStream(turn.events),
        result: Deferred.await(turn.done)
      } satisfies Turn
    }).pipe(Effect.withSpan("Session.send"))

  const interrupt = Effect.gen(function*() {
    if (Option.isNone(yield* Ref.get(current))) return
    yield* Ref.set(interruptRequested, true)
    yield* Queue.offer(signals, { _tag: "Interrupted" })
    yield* request({ subtype: "interrupt" })
  }).pipe(Effect.withSpan("Session.interrupt"))

  // Closing the scope: interrupt a live turn, close stdin; ProcessHost escalates after.
  yield* Effect.addFinalizer(() =>
    Effect.gen(function*() {
      if (Option.isSome(yield* Ref.get(current)) && Option.isNone(yield* Deferred.poll(ended))) {
        yield* request({ subtype: "interrupt" }, { timeout: Duration.seconds(1) }).pipe(Effect.ignore)
      }
      yield* child.closeStdin
      yield* shutdown(closed)
      yield* turns.stop
    })
  )

  // Hooks are registered through initialize, as {matcher, hookCallbackIds} per event.
  const hookConfig: Record<string, Array<Control.HookMatcher>> = {}
  for (const registration of Option.match(hooks, { onNone: () => [], onSome: (h) => h.registrations })) {
    const id = `hook_${hookHandlers.size + 1}`
    hookHandlers.set(id, registration)
    const matchers = hookConfig[registration.event] ?? (hookConfig[registration.event] = [])
    matchers.push({
      hookCallbackIds: [id],
      ...(registration.matcher === undefined ? {} : { matcher: registration.matcher }),
      ...(registration.timeout === undefined ? {} : { timeout: registration.timeout })
    })
  }
  // Written before any user message, and the CLI reads stdin in order: the
  // first turn need not wait for the answer (that would cost a round trip).
  const initialize = yield* submit(
    hookHandlers.size === 0 ? { subtype: "initialize" } : { subtype: "initialize", hooks: hookConfig }
  ).pipe(Effect.flatMap(Effect.cached))

  const unit = <A>(effect: Effect.Effect<A, RequestError>) => Effect.asVoid(effect)

  const session: Session = {
    pid: child.pid,
    sessionId: Deferred.await(sessionId),
    state,
    subscribe: PubSub.subscribe(events),
    initialize,
    send,
    request,
    interrupt,
    setPermissionMode: (mode) =>
      request({ subtype: "set_permission_mode", mode }).pipe(
        Effect.zipRight(SubscriptionRef.update(state, (s) => ({ ...s, permissionMode: mode })))
      ),
    setModel: (model) =>
      request({ subtype: "set_model", model }).pipe(
        // The CLI answers with the model it actually chose: it maps aliases and falls back on names it does not know.
        Effect.flatMap((response) => {
          const chosen = response?.["model"]
          return SubscriptionRef.update(state, (s) => ({ ...s, model: typeof chosen === "string" ? chosen : model ?? s.model }))
        })
      ),
    setMaxThinkingTokens: (tokens) => unit(request({ subtype: "set_max_thinking_tokens", max_thinking_tokens: tokens })),
    stopTask: (taskId) => unit(request({ subtype: "stop_task", task_id: taskId })),
    mcpStatus: request({ subtype: "mcp_status" }),
    getContextUsage: request({ subtype: "get_context_usage" }),
    end: child.closeStdin,
    // ProcessHost's own wait: it resolves even after the session's scope closed.
    exit: child.await
  }
  return session
})

/** The transcript path the CLI uses for a session under a config root. */
export const transcriptPath = (configDir: string, cwd: string, sessionId: string): string =>
  TranscriptLayout.sessionPaths(TranscriptLayout.projectDir(configDir, cwd), sessionId).transcript

