/**
 * The Agent Client Protocol agent: Claude Code sessions for any ACP client
 * (Zed, JetBrains IDEs, Neovim and Emacs plugins, `acpx`), over one
 * connection (`skein acp` runs it on stdio).
 *
 * Each ACP session is a `LiveSession` in a scope of its own under the
 * connection's: `session/close` closes it, and the connection's end (the
 * client closed stdin) closes them all, which stops every CLI process. New
 * sessions are taken from a warm `SessionPool` when one is configured.
 * Sessions are found, listed, loaded and forked in skein's store (the CLI's
 * own transcripts).
 */
import * as Acp from "@agentclientprotocol/sdk/unstable"
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import { History } from "@skein/canonical"
import { type Compaction, TokenCounter } from "@skein/compact"
import { type ProcessHost, TaskManager } from "@skein/kernel"
import { Session, SessionPool } from "@skein/session"
import { Branch, ResumeLoader, SessionIndex, TranscriptLayout, TranscriptStore } from "@skein/store"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as Scope from "effect/Scope"
import * as Crypto from "node:crypto"
import * as Path from "node:path"
import { type AcpError, codeOf, dataOf, SessionFailed, SessionNotFound } from "./AcpError.js"
import * as Updates from "./Updates.js"
import * as Aliases from "./internal/aliases.js"
import * as LiveSession from "./internal/liveSession.js"
import { mcpArgs } from "./internal/mcpServers.js"
import * as Modes from "./internal/modes.js"

export interface Options {
  /** The CLIs' config root (`CLAUDE_CONFIG_DIR`): where transcripts are found, listed and written. */
  readonly configDir: string
  /** Options every CLI gets (env, executable, bare, model, …); `cwd`, resume and MCP servers are the session's. */
  readonly session?: Partial<Session.SessionOptions> | undefined
  /** Keep `size` CLI processes warm for sessions in `cwd` (no MCP servers of the client's): `session/new` takes one. */
  readonly pool?: { readonly size: number; readonly cwd: string } | undefined
  /** The model's context window, reported in `usage_update`. Default 200,000 tokens. */
  readonly contextWindow?: number | undefined
  readonly name?: string | undefined
  readonly version?: string | undefined
}

export const protocolVersion = Acp.PROTOCOL_VERSION

/** What the handlers run with. */
type Context =
  | LiveSession.StartContext
  | Compaction.RunContext
  | SessionIndex.SessionIndex
  | FileSystem.FileSystem
  | ProcessHost.ProcessHost

interface Held {
  readonly live: LiveSession.LiveSession
  readonly scope: Scope.CloseableScope
}

const capabilities: Acp.AgentCapabilities = {
  loadSession: true,
  promptCapabilities: { image: true, audio: false, embeddedContext: true },
  mcpCapabilities: { http: true, sse: true },
  sessionCapabilities: { list: {}, resume: {}, fork: {}, close: {} }
}

/** The options of one session's CLI: the base, the session's folder, its MCP servers, and a resume. */
const sessionOptions = (
  base: Partial<Session.SessionOptions>,
  cwd: string,
  servers: ReadonlyArray<Acp.McpServer> | undefined,
  resume: string | undefined
): Session.SessionOptions => {
  const extra = mcpArgs(servers ?? [])
  return {
    ...base,
    cwd,
    includePartialMessages: base.includePartialMessages ?? true,
    ...(extra.length > 0 ? { extraArgs: [...(base.extraArgs ?? []), ...extra] } : {}),
    ...(resume === undefined ? {} : { resume })
  }
}

/** An error for the JSON-RPC answer: ours with its code and fields, anything else as an internal error. */
const requestErrorOf = (cause: Cause.Cause<AcpError>): Acp.RequestError => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) return new Acp.RequestError(codeOf(failure.value), failure.value.message, dataOf(failure.value))
  return Acp.RequestError.internalError({ cause: Cause.pretty(cause).slice(0, 2000) })
}

/**
 * Serves one ACP connection on `stream` until it closes (the client closed
 * stdin), then ends every session. Logs never go to the stream.
 */
export const serve = Effect.fn("AcpAgent.serve")(function*(stream: Acp.Stream, options: Options) {
  // Compaction's summarizing pass forks a worker, which is a task of a TaskManager.
  const tasks = Layer.orDie(TaskManager.layer({ root: Path.join(Aliases.dirOf(options.configDir), "tasks") }))
  const stores = Layer.mergeAll(TranscriptStore.layer, SessionIndex.layer, TokenCounter.layer, tasks).pipe(
    Layer.provideMerge(TranscriptLayout.layer(options.configDir))
  )
  return yield* run(stream, options).pipe(Effect.provide(stores))
})

const run = (stream: Acp.Stream, options: Options) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const fs = yield* FileSystem.FileSystem
    const index = yield* SessionIndex.SessionIndex
    const base = options.session ?? {}
    const pool = options.pool === undefined || options.pool.size <= 0
      ? Option.none<SessionPool.SessionPool["Type"]>()
      : Option.some(yield* SessionPool.make({ profiles: [sessionOptions(base, options.pool.cwd, [], undefined)], size: options.pool.size }))
    const sessions = new Map<string, Held>()
    const connection: { current: Acp.AgentConnection | undefined } = { current: undefined }
    const runtime = yield* Effect.runtime<Context>()

    const client: LiveSession.Client = {
      update: (sessionId, update) =>
        Effect.promise(() => connection.current?.client.notify("session/update", { sessionId, update }) ?? Promise.resolve()).pipe(
          Effect.catchAllDefect(() => Effect.void)
        ),
      requestPermission: (request) =>
        Effect.tryPromise({
          try: (signal) => {
            const client = connection.current?.client
            if (client === undefined) return Promise.reject(new Error("no connection"))
            return client.request("session/request_permission", request, { cancellationSignal: signal })
          },
          catch: (e) => e
        })
    }

    /** Runs an effect for a handler: its value, or a JSON-RPC error. */
    const handle = <A>(effect: Effect.Effect<A, AcpError, Context>) =>
      Runtime.runPromiseExit(runtime)(effect).then((exit) => {
        if (Exit.isSuccess(exit)) return exit.value
        throw requestErrorOf(exit.cause)
      })

    const held = (acpId: string) =>
      Effect.suspend(() => {
        const found = sessions.get(acpId)
        return found === undefined ? Effect.fail(new SessionNotFound({ sessionId: acpId })) : Effect.succeed(found.live)
      })

    /** Starts a session's CLI in a scope of its own; `replay` runs first, once the history is read. */
    const open = (acpId: string, launch: Session.SessionOptions, history: Option.Option<History.Loaded>) =>
      Effect.gen(function*() {
        const child = yield* Scope.fork(scope, ExecutionStrategy.sequential)
        const start = LiveSession.start({
          acpId,
          session: launch,
          client,
          contextWindow: options.contextWindow,
          translator: Option.getOrUndefined(Option.map(history, (h) => h.state)),
          onCliSessionId: (cliSessionId) =>
            cliSessionId === acpId ? Effect.void : Effect.provideService(Aliases.write(options.configDir, acpId, { cliSessionId, cwd: launch.cwd }), FileSystem.FileSystem, fs)
        })
        const withPool = Option.isSome(pool) ? Effect.provideService(start, SessionPool.SessionPool, pool.value) : start
        const live = yield* withPool.pipe(
          Scope.extend(child),
          Effect.onError((cause) => Scope.close(child, Exit.failCause(cause)))
        )
        sessions.set(acpId, { live, scope: child })
        return live
      })

    const close = (acpId: string) =>
      Effect.suspend(() => {
        const found = sessions.get(acpId)
        if (found === undefined) return Effect.void
        sessions.delete(acpId)
        return Scope.close(found.scope, Exit.void)
      })

    /** The stored session behind an ACP id: its CLI id, transcript and folder. */
    const stored = (acpId: string) =>
      Effect.gen(function*() {
        const cliSessionId = yield* Aliases.resolve(options.configDir, acpId)
        const found = yield* index.find({ _tag: "Id", sessionId: cliSessionId }).pipe(Effect.orElseSucceed(() => Option.none()))
        if (Option.isNone(found)) return yield* new SessionNotFound({ sessionId: acpId })
        return { cliSessionId, path: found.value.path, cwd: found.value.cwd }
      })

    const failed = (acpId: string, what: string) => (e: PlatformError | ResumeLoader.LoadError | Branch.BranchWriteError) =>
      new SessionFailed({ sessionId: acpId, reason: `${what}: ${e.message}` })

    /** `session/load` and `session/resume`: the same CLI session, resumed; the history replayed when asked. */
    const reopen = (params: Acp.LoadSessionRequest | Acp.ResumeSessionRequest, replay: boolean) =>
      Effect.gen(function*() {
        const acpId = params.sessionId
        yield* close(acpId)
        const session = yield* stored(acpId)
        const history = yield* History.fromTranscript(session.path, { cliSessionId: session.cliSessionId, cwd: params.cwd }).pipe(
          Effect.mapError(failed(acpId, "reading the transcript"))
        )
        if (replay) {
          for (const update of Updates.replay(history.messages, { contextWindow: options.contextWindow })) yield* client.update(acpId, update)
        }
        const live = yield* open(acpId, sessionOptions(base, params.cwd, params.mcpServers, session.cliSessionId), Option.some(history))
        return { modes: Modes.state(yield* live.mode) }
      })

    const app = Acp.agent({ name: options.name ?? "skein" })
      .onRequest("initialize", () => ({
        protocolVersion,
        agentCapabilities: capabilities,
        authMethods: [],
        agentInfo: { name: options.name ?? "skein", title: "Claude Code (skein)", version: options.version ?? "0.1.0" }
      }))
      .onRequest("authenticate", () => ({}))
      .onRequest("session/new", ({ params }) =>
        handle(Effect.gen(function*() {
          const acpId = Crypto.randomUUID()
          const live = yield* open(acpId, sessionOptions(base, params.cwd, params.mcpServers, undefined), Option.none())
          return { sessionId: acpId, modes: Modes.state(yield* live.mode) }
        })))
      .onRequest("session/load", ({ params }) => handle(reopen(params, true)))
      .onRequest("session/resume", ({ params }) => handle(reopen(params, false)))
      .onRequest("session/fork", ({ params }) =>
        handle(Effect.gen(function*() {
          const parent = yield* stored(params.sessionId)
          const view = yield* ResumeLoader.load(parent.path).pipe(Effect.mapError(failed(params.sessionId, "reading the transcript")))
          const last = view.entries.at(-1)
          if (last === undefined) return yield* new SessionFailed({ sessionId: params.sessionId, reason: "nothing to fork yet" })
          const branched = yield* Branch.branch(parent.path, { at: last.uuid }).pipe(Effect.mapError(failed(params.sessionId, "forking")))
          const live = yield* open(branched.sessionId, sessionOptions(base, params.cwd, params.mcpServers, branched.sessionId), Option.none())
          return { sessionId: branched.sessionId, modes: Modes.state(yield* live.mode) }
        })))
      .onRequest("session/list", ({ params }) =>
        handle(Effect.gen(function*() {
          const aliases = yield* Aliases.reverse(options.configDir)
          const found = yield* index.list({ cwd: params.cwd ?? undefined }).pipe(
            Effect.mapError((e) => new SessionFailed({ sessionId: "", reason: `listing sessions: ${e.message}` }))
          )
          const listed = found.map((s): Acp.SessionInfo => ({
            sessionId: aliases.get(s.sessionId) ?? s.sessionId,
            cwd: s.cwd ?? params.cwd ?? "",
            ...(s.title === undefined ? {} : { title: s.title }),
            updatedAt: s.mtime.toISOString()
          }))
          return { sessions: listed }
        })))
      .onRequest("session/close", ({ params }) => handle(Effect.as(close(params.sessionId), {})))
      .onRequest("session/set_mode", ({ params }) =>
        handle(Effect.flatMap(held(params.sessionId), (live) => Effect.as(live.setMode(params.modeId), {}))))
      .onRequest("session/prompt", ({ params }) =>
        handle(Effect.gen(function*() {
          const live = yield* held(params.sessionId)
          return { stopReason: yield* live.prompt(params.prompt) }
        })))
      .onNotification("session/cancel", ({ params }) =>
        handle(Effect.flatMap(held(params.sessionId), (live) => live.cancel)).catch(() => undefined))

    const opened = app.connect(stream)
    connection.current = opened
    yield* Effect.addFinalizer(() => Effect.sync(() => opened.close()))
    // Sessions first, then the pool's processes: finalizers run last-in first.
    yield* Effect.addFinalizer(() => Effect.forEach([...sessions.keys()], close, { discard: true }))
    yield* Effect.promise(() => opened.closed)
  }).pipe(Effect.scoped)
