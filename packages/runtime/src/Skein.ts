/**
 * One layer to embed skein. It provides everything sessions, workers and the
 * session registry need, so an embedding service writes one `Effect.provide`:
 *
 * - ProcessHost over a journal file, so a restarted service reaps the CLIs a
 *   crashed one left behind;
 * - TaskManager (workers' task records and output);
 * - TranscriptLayout, TranscriptStore and SessionIndex over the CLIs' config root;
 * - serve's SessionRegistry, with its event log and permission broker;
 * - Node's FileSystem, Path, CommandExecutor and Terminal;
 * - kernel's SlicedScheduler, so fifty busy sessions do not keep timers and
 *   pipes waiting (turn it off with `scheduler: false`).
 *
 * Where things live:
 *
 * | what | where |
 * |---|---|
 * | transcripts, the session index | `configDir` (`CLAUDE_CONFIG_DIR`, else `~/.claude`) |
 * | skein's state | `stateDir` (`SKEIN_ROOT`, else `<configDir>/skein`) |
 * | the process journal | `<stateDir>/processes.json` |
 * | task records and output | `<stateDir>/tasks` |
 * | the registry's event log | `<stateDir>/serve/events` |
 */
import { NodeContext } from "@effect/platform-node"
import { ProcessHost, ProcessJournal, SlicedScheduler, TaskManager } from "@skein/kernel"
import { PermissionBroker, ServerEvents, SessionRegistry } from "@skein/serve"
import type { Session } from "@skein/session"
import { SqlStore, type SqlStoreError } from "@skein/sql"
import { EventLog, SessionIndex, TranscriptLayout, TranscriptStore } from "@skein/store"
import { Config, type ConfigError, Context, type Duration, Effect, Layer, Option } from "effect"
import * as Path from "node:path"

export interface SkeinConfig {
  /** The CLIs' config root (`CLAUDE_CONFIG_DIR`): transcripts and the session index. */
  readonly configDir: string
  /** skein's own state: the process journal, task records, the registry's event log. Default `<configDir>/skein`. */
  readonly stateDir?: string | undefined
  /** Options every session the registry starts gets (executable, env, bare, …). */
  readonly session?: Partial<Session.SessionOptions> | undefined
  /** Defaults for every child process: how long stdin's close and SIGTERM may take before the next step. */
  readonly stopTimeouts?: Partial<ProcessHost.StopTimeouts> | undefined
  /** The registry denies a permission ask no client answers after this long. Default 5 minutes. */
  readonly permissionTimeout?: Duration.DurationInput | undefined
  /** The registry stops a session idle for this long (its transcript stays). Default 10 minutes. */
  readonly idleTimeout?: Duration.DurationInput | undefined
  /**
   * Session state in SQL: `sqlite:<file>` or `postgres://…`. The registry's
   * event log, catalog and pending asks then live in rows, and each live
   * session's transcript is mirrored there before its turn's end is
   * reported; without it, files stay the default.
   */
  readonly store?: string | undefined
  /** The scheduler the provided effect runs on: kernel's SlicedScheduler with these options (the default), or `false` for Effect's own. */
  readonly scheduler?: SlicedScheduler.Options | false | undefined
}

/** Where this layer keeps things, resolved: read it to start sessions under the same config root. */
export class Skein extends Context.Tag("@skein/runtime/Skein")<Skein, {
  readonly configDir: string
  readonly stateDir: string
  readonly journal: string
}>() {}

/** What `layer` provides. */
export type Services =
  | Skein
  | NodeContext.NodeContext
  | ProcessHost.ProcessHost
  | ProcessJournal.ProcessJournal
  | TaskManager.TaskManager
  | TranscriptLayout.TranscriptLayout
  | TranscriptStore.TranscriptStore
  | SessionIndex.SessionIndex
  | SessionRegistry.SessionRegistry
  | ServerEvents.ServerEvents
  | PermissionBroker.PermissionBroker

/** Failures of building the layer: the task store, the event log or the SQL store could not be opened. */
export type LayerError =
  | TaskManager.TaskStoreError
  | EventLog.EventLogError
  | SqlStoreError.StoreUnavailable
  | SqlStoreError.BadStoreUrl

/** The resolved paths of a config. */
export const paths = (config: SkeinConfig): Skein["Type"] => {
  const configDir = Path.resolve(config.configDir)
  const stateDir = Path.resolve(config.stateDir ?? Path.join(configDir, "skein"))
  return { configDir, stateDir, journal: Path.join(stateDir, "processes.json") }
}

/** Every service skein needs, over the folders of `config`. */
export const layer = (config: SkeinConfig): Layer.Layer<Services, LayerError> => {
  const where = paths(config)
  const host = ProcessHost.layerJournal({ journal: where.journal, stopTimeouts: config.stopTimeouts })
  const stores = Layer.mergeAll(TranscriptStore.layer, SessionIndex.layer).pipe(
    Layer.provideMerge(TranscriptLayout.layer(where.configDir))
  )
  const sql = config.store === undefined ? Layer.empty : SqlStore.layer(config.store)
  const serving = Layer.mergeAll(
    ServerEvents.layer({ dir: Path.join(where.stateDir, "serve", "events") }),
    PermissionBroker.layer({ timeout: config.permissionTimeout })
  ).pipe(Layer.provide(sql))
  const registry = SessionRegistry.layer({
    configDir: where.configDir,
    session: config.session,
    idleTimeout: config.idleTimeout,
    questionTimeout: config.permissionTimeout
  }).pipe(Layer.provideMerge(serving), Layer.provide(sql))
  const scheduler = config.scheduler === false ? Layer.empty : SlicedScheduler.layer(config.scheduler)
  return Layer.mergeAll(
    registry,
    stores,
    TaskManager.layer({ root: where.stateDir }),
    Layer.succeed(Skein, where),
    scheduler
  ).pipe(Layer.provideMerge(host), Layer.provideMerge(NodeContext.layer))
}

/** The folders from the environment: `CLAUDE_CONFIG_DIR` (else `~/.claude`) and `SKEIN_ROOT` (else `<configDir>/skein`). */
export const config: Config.Config<SkeinConfig> = Config.all({
  configDir: TranscriptLayout.rootConfig,
  stateDir: Config.option(Config.string("SKEIN_ROOT"))
}).pipe(Config.map(({ configDir, stateDir }) => ({ configDir, stateDir: Option.getOrUndefined(stateDir) })))

/** `layer` over the folders the environment names (see `config`); `options` add the rest. */
export const layerConfig = (
  options?: Omit<SkeinConfig, "configDir" | "stateDir">
): Layer.Layer<Services, LayerError | ConfigError.ConfigError> =>
  Layer.unwrapEffect(Effect.map(config, (folders) => layer({ ...options, ...folders })))
