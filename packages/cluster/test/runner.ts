/**
 * One cluster runner as its own OS process, as one machine of a cluster
 * would be: the HTTP edge and a socket runner over the shared database,
 * its CLIs offline against the test's FakeModel, its own config dir. Its
 * one argument is the JSON of `RunnerConfig`; it prints `listening on <url>`.
 * For benches it can run testkit's stand-in CLI instead of the real one, and
 * serve's in-process registry (no cluster) over the same database, as the
 * baseline a cluster's hop is measured against. `SKEIN_CLUSTER_DEBUG=1` in
 * the environment logs at debug level (the library's shard assignments,
 * health checks, singletons), for a failing run's runner output.
 */
import * as HttpServer from "@effect/platform/HttpServer"
import { NodeContext, NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { ProcessHost } from "@skein/kernel"
import { Serve } from "@skein/serve"
import { SqlStore } from "@skein/sql"
import { ClaudeCli, StandInCli } from "@skein/testkit"
import { Console, Duration, Effect, Layer, Logger, LogLevel } from "effect"
import { createServer } from "node:http"
import * as Path from "node:path"
import * as ClusterServe from "../src/ClusterServe.js"

export interface RunnerConfig {
  readonly database: string
  readonly configDir: string
  readonly cwd: string
  readonly tmpDir: string
  readonly modelUrl: string
  readonly runnerPort: number
  readonly token: string
  /** `Single` (sqlite, one process) or `Socket` (Postgres, many). */
  readonly runner: "Single" | "Socket"
  /** Run testkit's stand-in CLI (a canned turn per prompt) instead of the real one. */
  readonly standIn?: boolean | undefined
  /** `local`: serve's in-process registry over the same database, no cluster. Default `cluster`. */
  readonly registry?: "cluster" | "local" | undefined
  /** `--bare` (default true); `AskUserQuestion` exists only without it. */
  readonly bare?: boolean | undefined
  /** Milliseconds a running turn may go on once its shard moves (`ClusterServe`'s `turnDrain`); default the library's. */
  readonly turnDrainMillis?: number | undefined
}

const config: RunnerConfig = JSON.parse(process.argv[2]!)

const standIn = StandInCli.command()

const options: Serve.Options = {
  token: config.token,
  roots: [config.cwd],
  configDir: config.configDir,
  stateDir: Path.join(config.configDir, "skein", "serve"),
  session: {
    env: ClaudeCli.isolatedEnv({ baseUrl: config.modelUrl, configDir: config.configDir, tmpDir: config.tmpDir }),
    bare: config.bare ?? true,
    stopTimeouts: { stdinGrace: "500 millis", termGrace: "500 millis" },
    ...(config.standIn === true ? { executable: standIn.command, executableArgs: standIn.args } : {})
  }
}

const served = config.registry === "local" ? Serve.layer(options) : ClusterServe.layer({
  ...options,
  turnDrain: config.turnDrainMillis === undefined ? undefined : Duration.millis(config.turnDrainMillis),
  runner: config.runner === "Single"
    ? { _tag: "Single" }
    : { _tag: "Socket", options: { runnerAddress: { host: "127.0.0.1", port: config.runnerPort } } }
})

const server = served.pipe(
  Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
  Layer.provideMerge(SqlStore.layer(config.database)),
  Layer.provideMerge(Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer))
)

const announce = Layer.effectDiscard(HttpServer.addressWith((address) =>
  Console.log(address._tag === "TcpAddress" ? `listening on http://127.0.0.1:${address.port}` : "listening on a socket")
))

const debug = process.env["SKEIN_CLUSTER_DEBUG"] === "1" ? Logger.minimumLogLevel(LogLevel.Debug) : Layer.empty

NodeRuntime.runMain(Layer.launch(Layer.provide(announce, server)).pipe(Effect.provide(debug), Effect.orDie), { disablePrettyLogger: true })
