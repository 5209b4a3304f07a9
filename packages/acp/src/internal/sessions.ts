/**
 * The sessions of one connection, by ACP id: each a `LiveSession` in a scope
 * of its own under the connection's, and the store's sessions behind the
 * ids a client loads, resumes, forks and lists.
 */
import type * as Acp from "@agentclientprotocol/sdk/unstable"
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import { History } from "@skein/canonical"
import type { Session } from "@skein/session"
import { SessionPool } from "@skein/session"
import { Branch, ResumeLoader, SessionIndex } from "@skein/store"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Crypto from "node:crypto"
import { SessionFailed, SessionNotFound } from "../AcpError.js"
import * as Updates from "../Updates.js"
import * as Aliases from "./aliases.js"
import * as LiveSession from "./liveSession.js"
import { mcpArgs } from "./mcpServers.js"
import * as Modes from "./modes.js"

export interface Options {
  readonly configDir: string
  readonly session: Partial<Session.SessionOptions>
  readonly contextWindow?: number | undefined
  readonly client: LiveSession.Client
  readonly pool: Option.Option<SessionPool.SessionPool["Type"]>
}

interface Held {
  readonly live: LiveSession.LiveSession
  readonly scope: Scope.CloseableScope
}

/** The options of one session's CLI: the base, the session's folder, its MCP servers, and a resume. */
export const sessionOptions = (
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

/** Sessions live in the current scope: closing it closes every one. */
export const make = (options: Options) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const fs = yield* FileSystem.FileSystem
    const index = yield* SessionIndex.SessionIndex
    const { client, pool } = options
    const base = options.session
    const sessions = new Map<string, Held>()
    yield* Effect.addFinalizer(() => Effect.forEach([...sessions.keys()], close, { discard: true }))

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

    const create = (params: Acp.NewSessionRequest) =>
      Effect.gen(function*() {
        const acpId = Crypto.randomUUID()
        const live = yield* open(acpId, sessionOptions(base, params.cwd, params.mcpServers, undefined), Option.none())
        return { sessionId: acpId, modes: Modes.state(yield* live.mode) }
      })

    const fork = (params: Acp.ForkSessionRequest) =>
      Effect.gen(function*() {
        const parent = yield* stored(params.sessionId)
        const view = yield* ResumeLoader.load(parent.path).pipe(Effect.mapError(failed(params.sessionId, "reading the transcript")))
        const last = view.entries.at(-1)
        if (last === undefined) return yield* new SessionFailed({ sessionId: params.sessionId, reason: "nothing to fork yet" })
        const branched = yield* Branch.branch(parent.path, { at: last.uuid }).pipe(Effect.mapError(failed(params.sessionId, "forking")))
        const live = yield* open(branched.sessionId, sessionOptions(base, params.cwd, params.mcpServers, branched.sessionId), Option.none())
        return { sessionId: branched.sessionId, modes: Modes.state(yield* live.mode) }
      })

    const list = (params: Acp.ListSessionsRequest) =>
      Effect.gen(function*() {
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
      })

    return { held, create, reopen, fork, list, close }
  })
