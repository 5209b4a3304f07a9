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
import * as FileSystem from "@effect/platform/FileSystem"
import { type Compaction, TokenCounter } from "@skein/compact"
import { type ProcessHost, TaskManager } from "@skein/kernel"
import { Session, SessionPool } from "@skein/session"
import { SessionIndex, TranscriptLayout, TranscriptStore } from "@skein/store"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as Path from "node:path"
import { type AcpError, codeOf, dataOf } from "./AcpError.js"
import * as Aliases from "./internal/aliases.js"
import type * as LiveSession from "./internal/liveSession.js"
import * as Sessions from "./internal/sessions.js"

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


const capabilities: Acp.AgentCapabilities = {
  loadSession: true,
  promptCapabilities: { image: true, audio: false, embeddedContext: true },
  mcpCapabilities: { http: true, sse: true },
  sessionCapabilities: { list: {}, resume: {}, fork: {}, close: {} }
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
    const base = options.session ?? {}
    const pool = options.pool === undefined || options.pool.size <= 0
      ? Option.none<SessionPool.SessionPool["Type"]>()
      : Option.some(yield* SessionPool.make({ profiles: [Sessions.sessionOptions(base, options.pool.cwd, [], undefined)], size: options.pool.size }))
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

    // Sessions close before the pool's processes: finalizers run last-in first.
    const sessions = yield* Sessions.make({ configDir: options.configDir, session: base, contextWindow: options.contextWindow, client, pool })

    /** Runs an effect for a handler: its value, or a JSON-RPC error. */
    const handle = <A>(effect: Effect.Effect<A, AcpError, Context>) =>
      Runtime.runPromiseExit(runtime)(effect).then((exit) => {
        if (Exit.isSuccess(exit)) return exit.value
        throw requestErrorOf(exit.cause)
      })

    const app = Acp.agent({ name: options.name ?? "skein" })
      .onRequest("initialize", () => ({
        protocolVersion,
        agentCapabilities: capabilities,
        authMethods: [],
        agentInfo: { name: options.name ?? "skein", title: "Claude Code (skein)", version: options.version ?? "0.1.0" }
      }))
      .onRequest("authenticate", () => ({}))
      .onRequest("session/new", ({ params }) => handle(sessions.create(params)))
      .onRequest("session/load", ({ params }) => handle(sessions.reopen(params, true)))
      .onRequest("session/resume", ({ params }) => handle(sessions.reopen(params, false)))
      .onRequest("session/fork", ({ params }) => handle(sessions.fork(params)))
      .onRequest("session/list", ({ params }) => handle(sessions.list(params)))
      .onRequest("session/close", ({ params }) => handle(Effect.as(sessions.close(params.sessionId), {})))
      .onRequest("session/set_mode", ({ params }) =>
        handle(Effect.flatMap(sessions.held(params.sessionId), (live) => Effect.as(live.setMode(params.modeId), {}))))
      .onRequest("session/prompt", ({ params }) =>
        handle(Effect.gen(function*() {
          const live = yield* sessions.held(params.sessionId)
          return { stopReason: yield* live.prompt(params.prompt) }
        })))
      .onNotification("session/cancel", ({ params }) =>
        handle(Effect.flatMap(sessions.held(params.sessionId), (live) => live.cancel)).catch(() => undefined))

    const opened = app.connect(stream)
    connection.current = opened
    yield* Effect.addFinalizer(() => Effect.sync(() => opened.close()))
    yield* Effect.promise(() => opened.closed)
  }).pipe(Effect.scoped)
