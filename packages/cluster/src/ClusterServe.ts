/**
 * serve's whole server with sessions as cluster entities: the HTTP edge,
 * this process's runner, and the session entities it hosts. Every runner of
 * a cluster runs this layer over the same database; any runner's edge
 * serves any session, and its SSE follows the shared SQL event log.
 *
 * Needs the database as `SqlStore` and `SqlClient` (`SqlStore.layer(url)`).
 *
 * @since 0.1.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { PermissionBroker, type Serve, Server, ServerEvents } from "@skein/serve"
import { AskLedger, SessionCatalog, TranscriptMirror } from "@skein/sql"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Path from "node:path"
import * as ClusterAsks from "./ClusterAsks.js"
import * as ClusterRegistry from "./ClusterRegistry.js"
import * as ClusterRunner from "./ClusterRunner.js"
import * as RunningSessions from "./internal/runningSessions.js"
import * as RunnerSessions from "./RunnerSessions.js"
import * as SessionHost from "./SessionHost.js"
import * as TurnLedger from "./TurnLedger.js"

/**
 * How this process runs in the cluster.
 *
 * @since 0.1.0
 */
export type Runner =
  | { readonly _tag: "Single"; readonly options?: ClusterRunner.SingleOptions | undefined }
  | { readonly _tag: "Socket"; readonly options: ClusterRunner.SocketOptions }

/**
 * @since 0.1.0
 */
export interface Options extends Serve.Options {
  readonly runner: Runner
  /**
   * How long a running turn may go on once its session's shard moves to a
   * runner that joined; past it the turn is cut and ends `RunnerLost`
   * (`SessionHost`'s `turnDrain`). Default 1 minute.
   */
  readonly turnDrain?: Duration.DurationInput | undefined
}

/**
 * This runner's name in the ask ledger, whose open asks from an earlier run
 * it closes at start: a socket runner's address (unique among live runners,
 * so runners on one machine leave each other's asks alone); a single runner
 * is the only one on its database, and keeps the machine's hostname.
 *
 * @since 0.1.0
 */
export const askHostOf = (runner: Runner): string | undefined =>
  runner._tag === "Socket" ? `runner-${runner.options.runnerAddress.host}:${runner.options.runnerAddress.port}` : undefined

/**
 * @since 0.1.0
 */
export const layer = (options: Options) =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const roots = yield* Effect.forEach(options.roots, (root) => fs.realPath(root))
    const askHost = askHostOf(options.runner)
    const base = Layer.mergeAll(
      ServerEvents.layer({ dir: Path.join(options.stateDir, "events") }),
      PermissionBroker.layer({ timeout: options.permissionTimeout }),
      SessionCatalog.layer,
      TranscriptMirror.layer,
      AskLedger.layer({ hostName: askHost }),
      TurnLedger.layer
    )
    const sessions = RunnerSessions.layer({
      configDir: options.configDir,
      roots,
      session: options.session,
      legacy: options.legacy,
      idleTimeout: options.idleTimeout,
      silenceTimeout: options.silenceTimeout,
      questionTimeout: options.permissionTimeout,
      askHost
    })
    const runner = options.runner._tag === "Single" ? ClusterRunner.single(options.runner.options) : ClusterRunner.socket(options.runner.options)
    return Server.layer({
      token: Redacted.isRedacted(options.token) ? options.token : Redacted.make(options.token),
      roots,
      origins: options.origins,
      hosts: options.hosts,
      stateDir: options.stateDir,
      configDir: options.configDir,
      heartbeat: options.heartbeat,
      maxLag: options.maxLag
    }).pipe(
      // The routes' broker answers and lists every runner's asks; the runner's CLIs keep its own.
      Layer.provide(ClusterAsks.brokerLayer),
      Layer.provideMerge(ClusterRegistry.layer({ roots })),
      Layer.provide(options.runner._tag === "Single" ? RunningSessions.layerSingle : RunningSessions.layer()),
      Layer.provideMerge(ClusterAsks.layer),
      Layer.provideMerge(SessionHost.layer({ idleTimeout: options.idleTimeout, turnDrain: options.turnDrain })),
      // Built after the runner's sessions, closed before them: entities stop their CLIs through the registry.
      Layer.provideMerge(runner),
      Layer.provideMerge(sessions),
      Layer.provideMerge(base)
    )
  }))
