/**
 * A skein server on 127.0.0.1 (port 0) whose CLIs run offline against a
 * FakeModel, each test in its own config, cwd and state folders.
 *
 * The session store is the one hook that varies the backing:
 * `SKEIN_SERVE_STORE=files` (the default: segment files, transcripts on
 * disk only), `sqlite` (a file beside the server's state) or `postgres` (a
 * throwaway cluster per test file, a database per state folder). A server
 * started again on the same state folder finds the same store.
 */
import * as HttpServer from "@effect/platform/HttpServer"
import { NodeContext, NodeHttpServer } from "@effect/platform-node"
import { ProcessHost } from "@skein/kernel"
import { SqlStore } from "@skein/sql"
import { ClaudeCli, type FakeModel, Postgres } from "@skein/testkit"
import { Context, type Duration, Effect, Exit, Layer, Redacted, Scope } from "effect"
import { afterAll } from "vitest"
import * as Crypto from "node:crypto"
import { createServer } from "node:http"
import * as Path from "node:path"
import * as Serve from "../src/Serve.js"
import { ServerEvents } from "../src/ServerEvents.js"
import { SessionRegistry } from "../src/SessionRegistry.js"

export const token = "test-token-0123456789"

export type Backing = "files" | "sqlite" | "postgres"

/** The backing this run tests: `SKEIN_SERVE_STORE`, default `files`. */
export const backing: Backing = ((): Backing => {
  const named = process.env["SKEIN_SERVE_STORE"] ?? "files"
  if (named === "files" || named === "sqlite" || named === "postgres") return named
  throw new Error(`SKEIN_SERVE_STORE must be files, sqlite or postgres, got ${named}`)
})()

/** One Postgres cluster per test file, started on first use and stopped after the file's tests. */
const cluster = (() => {
  let started: Promise<{ readonly pg: Postgres.Postgres; readonly scope: Scope.CloseableScope }> | undefined
  afterAll(async () => {
    if (started !== undefined) await Effect.runPromise(Effect.flatMap(Effect.promise(() => started!), (c) => Scope.close(c.scope, Exit.void)))
  })
  const databases = new Map<string, Promise<string>>()
  return (stateDir: string): Effect.Effect<string> =>
    Effect.promise(() => {
      started ??= Effect.runPromise(Effect.gen(function*() {
        const scope = yield* Scope.make()
        return { pg: yield* Effect.orDie(Scope.extend(Postgres.start(), scope)), scope }
      }))
      let db = databases.get(stateDir)
      if (db === undefined) {
        const name = `s_${Crypto.createHash("sha256").update(stateDir).digest("hex").slice(0, 16)}`
        db = started.then((c) => Effect.runPromise(Effect.orDie(Effect.map(c.pg.database(name), Redacted.value))))
        databases.set(stateDir, db)
      }
      return db
    })
})()

/** The store URL a server on `stateDir` uses under this run's backing; undefined for files. */
export const storeUrlFor = (stateDir: string, using: Backing = backing): Effect.Effect<string | undefined> =>
  using === "files"
    ? Effect.succeed(undefined)
    : using === "sqlite"
    ? Effect.succeed(`sqlite:${Path.join(stateDir, "store.db")}`)
    : cluster(stateDir)

export interface Running {
  readonly url: string
  readonly dirs: ClaudeCli.OfflineDirs
  readonly stateDir: string
  readonly events: ServerEvents["Type"]
  readonly registry: SessionRegistry["Type"]
  readonly headers: Record<string, string>
  /** The session store's URL (`--store`); undefined with files. */
  readonly store: string | undefined
}

export interface StartOptions {
  readonly permissionTimeout?: Duration.DurationInput | undefined
  readonly maxLag?: number | undefined
  readonly heartbeat?: Duration.DurationInput | undefined
  readonly stateDir?: string | undefined
  readonly dirs?: ClaudeCli.OfflineDirs | undefined
  /** `--bare` (default true); some tools, such as AskUserQuestion, exist only without it. */
  readonly bare?: boolean | undefined
  /** Stop a live session after this long idle. Default the server's (10 minutes). */
  readonly idleTimeout?: Duration.DurationInput | undefined
  /** A fixed port, to restart a server where its clients reconnect. Default 0 (a free one). */
  readonly port?: number | undefined
  /** Closing also drops open connections (SSE streams), as a killed server does: Node's close waits for them. */
  readonly dropConnections?: boolean | undefined
  readonly silenceTimeout?: Duration.DurationInput | undefined
  /** Names the server answers to in `Host` besides the loopback ones. */
  readonly hosts?: ReadonlyArray<string> | undefined
  /** The session store: a URL, or none; default the run's backing (`SKEIN_SERVE_STORE`) over the state folder. */
  readonly store?: string | null | undefined
}

/** A Node server whose close, with `drop`, ends the connections still open (an EventSource would hold it forever). */
const nodeServer = (drop: boolean) => {
  const server = createServer()
  if (!drop) return server
  const close = server.close.bind(server)
  server.close = (callback) => {
    close(callback)
    server.closeAllConnections()
    return server
  }
  return server
}

/**
 * `SKEIN_SERVE_REGISTRY=cluster` runs the suite against @skein/cluster's
 * registry (sessions as entities of a single runner over a sqlite file in
 * the state folder). Imported dynamically: cluster is a layer above serve.
 */
const registryHook = Effect.promise(async (): Promise<(options: Serve.Options) => ReturnType<typeof Serve.layer>> => {
  if (process.env["SKEIN_SERVE_REGISTRY"] !== "cluster") return Serve.layer
  const [{ ClusterServe }, { SqlStore }] = await Promise.all([import("@skein/cluster"), import("@skein/sql")])
  return (options) =>
    ClusterServe.layer({ ...options, runner: { _tag: "Single" } }).pipe(
      Layer.provide(Layer.orDie(SqlStore.layer(`sqlite:${Path.join(options.stateDir, "cluster.db")}`))),
      Layer.catchAll((e) => Layer.die(e))
    )
})

export const start = (model: FakeModel.FakeModel["Type"] | undefined, options: StartOptions = {}) =>
  Effect.gen(function*() {
    const dirs = options.dirs ?? (yield* ClaudeCli.offlineDirs("skein-serve-"))
    const stateDir = options.stateDir ?? Path.join(dirs.root, "serve-state")
    const serveLayer = yield* registryHook
    const store = options.store === null ? undefined : options.store ?? (yield* storeUrlFor(stateDir))
    const layer = serveLayer({
      token,
      roots: [dirs.cwd],
      configDir: dirs.configDir,
      stateDir,
      permissionTimeout: options.permissionTimeout,
      idleTimeout: options.idleTimeout,
      maxLag: options.maxLag,
      heartbeat: options.heartbeat,
      hosts: options.hosts,
      silenceTimeout: options.silenceTimeout,
      session: {
        env: ClaudeCli.isolatedEnv({ baseUrl: model?.url ?? "http://127.0.0.1:9", configDir: dirs.configDir, tmpDir: dirs.tmpDir }),
        bare: options.bare ?? true,
        stopTimeouts: { stdinGrace: "500 millis", termGrace: "500 millis" }
      }
    }).pipe(
      Layer.provide(store === undefined ? Layer.empty : SqlStore.layer(store)),
      Layer.provideMerge(NodeHttpServer.layer(() => nodeServer(options.dropConnections ?? false), { port: options.port ?? 0, host: "127.0.0.1" })),
      Layer.provideMerge(Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer))
    )
    const context = yield* Layer.build(layer)
    const server = Context.get(context, HttpServer.HttpServer)
    const address = server.address
    const port = address._tag === "TcpAddress" ? address.port : 0
    const events = yield* Effect.provide(ServerEvents, context)
    const registry = yield* Effect.provide(SessionRegistry, context)
    return {
      url: `http://127.0.0.1:${port}`,
      dirs,
      stateDir,
      events,
      registry,
      headers: { authorization: `Bearer ${token}` },
      store
    } satisfies Running
  })

/** An event as the SDK's stream yields it. */
export interface AnyEvent {
  readonly type: string
  readonly properties: Record<string, unknown>
}

/** Reads the SDK's event stream until `done` says stop; returns what it saw. */
export const collectUntil = async (
  stream: AsyncIterable<unknown>,
  done: (event: AnyEvent, all: ReadonlyArray<AnyEvent>) => boolean | Promise<boolean>
) => {
  const seen: Array<AnyEvent> = []
  for await (const raw of stream) {
    const event = raw as AnyEvent
    seen.push(event)
    if (await done(event, seen)) break
  }
  return seen
}
