/**
 * A cluster server on 127.0.0.1: the HTTP edge, a runner and the session
 * entities in one process over a shared database (sqlite by default), its
 * CLIs offline against a FakeModel.
 */
import * as HttpServer from "@effect/platform/HttpServer"
import { NodeContext, NodeHttpServer } from "@effect/platform-node"
import { ProcessHost } from "@skein/kernel"
import { ServerEvents, SessionRegistry } from "@skein/serve"
import { SqlStore } from "@skein/sql"
import { ClaudeCli, type FakeModel } from "@skein/testkit"
import { Context, type Duration, Effect, Layer, Stream } from "effect"
import { createServer } from "node:http"
import * as Path from "node:path"
import * as ClusterServe from "../src/ClusterServe.js"

export const token = "test-token-0123456789"

export interface Running {
  readonly url: string
  readonly dirs: ClaudeCli.OfflineDirs
  readonly events: ServerEvents.ServerEvents["Type"]
  readonly registry: SessionRegistry.SessionRegistry["Type"]
  readonly store: SqlStore.SqlStore["Type"]
  readonly headers: Record<string, string>
  /** Everything the server's layer built (its runner's `Sharding`, the ledgers, …). */
  readonly context: Context.Context<Layer.Layer.Success<ReturnType<typeof serverLayer>>>
}

export interface StartOptions {
  /** `sqlite:<file>` or `postgres://…`; default a sqlite file under the dirs' root. */
  readonly database?: string | undefined
  readonly dirs?: ClaudeCli.OfflineDirs | undefined
  readonly runner?: ClusterServe.Runner | undefined
  readonly idleTimeout?: Duration.DurationInput | undefined
}

/** A server whose close also drops open connections (SSE streams), as a killed server does. */
const nodeServer = () => {
  const server = createServer()
  const close = server.close.bind(server)
  server.close = (callback) => {
    close(callback)
    server.closeAllConnections()
    return server
  }
  return server
}

/** Starts the server in the current scope; closing the scope stops it (its runner's messages stay in the database). */
export const start = (model: FakeModel.FakeModel["Type"], options: StartOptions = {}) =>
  Effect.gen(function*() {
    const dirs = options.dirs ?? (yield* ClaudeCli.offlineDirs("skein-cluster-"))
    const database = options.database ?? `sqlite:${Path.join(dirs.root, "cluster.db")}`
    const layer = serverLayer(model, dirs, database, options)
    const context = yield* Layer.build(layer)
    const address = Context.get(context, HttpServer.HttpServer).address
    const port = address._tag === "TcpAddress" ? address.port : 0
    return {
      url: `http://127.0.0.1:${port}`,
      dirs,
      events: Context.get(context, ServerEvents.ServerEvents),
      registry: Context.get(context, SessionRegistry.SessionRegistry),
      store: Context.get(context, SqlStore.SqlStore),
      headers: { authorization: `Bearer ${token}` },
      context
    } satisfies Running
  })

const serverLayer = (model: FakeModel.FakeModel["Type"], dirs: ClaudeCli.OfflineDirs, database: string, options: StartOptions) =>
  ClusterServe.layer({
    token,
    roots: [dirs.cwd],
    configDir: dirs.configDir,
    stateDir: Path.join(dirs.root, "serve-state"),
    idleTimeout: options.idleTimeout,
    runner: options.runner ?? { _tag: "Single" },
    session: {
      env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: dirs.configDir, tmpDir: dirs.tmpDir }),
      bare: true,
      stopTimeouts: { stdinGrace: "500 millis", termGrace: "500 millis" }
    }
  }).pipe(
    Layer.provideMerge(NodeHttpServer.layer(nodeServer, { port: 0, host: "127.0.0.1" })),
    Layer.provideMerge(SqlStore.layer(database)),
    Layer.provideMerge(Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer))
  )

/** One session's events in the log, from seq `from` on, until `done` holds for what was seen. */
export const eventsOf = (
  running: Running,
  sessionID: string,
  from: number,
  done: (seen: ReadonlyArray<ServerEvents.Envelope["payload"]>) => boolean
) =>
  Effect.gen(function*() {
    const seen: Array<ServerEvents.Envelope["payload"]> = []
    yield* running.events.follow(from).pipe(
      Stream.map((r) => r.message.payload),
      Stream.filter(({ properties }) =>
        typeof properties === "object" && properties !== null && "sessionID" in properties && properties.sessionID === sessionID
      ),
      Stream.takeUntil((payload) => {
        seen.push(payload)
        return done(seen)
      }),
      Stream.runDrain
    )
    return seen
  })

/** The `error.name` of a `session.error` payload. */
export const errorName = (payload: ServerEvents.Envelope["payload"]): string | undefined => {
  const props = payload.properties
  if (payload.type !== "session.error" || typeof props !== "object" || props === null || !("error" in props)) return undefined
  const error = props.error
  return typeof error === "object" && error !== null && "name" in error && typeof error.name === "string" ? error.name : undefined
}
