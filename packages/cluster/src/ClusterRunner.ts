/**
 * The runner layers: `single` (one process, `SingleRunner`'s parts, sqlite
 * or Postgres storage) and `socket` (one of many runners talking over TCP,
 * sharing Postgres). Both take their `ShardingConfig` from the caller
 * only: `ShardingConfig.layerFromEnv` would read `PORT`, which on a server
 * is the HTTP port, as the runner's.
 *
 * The defaults fail over in seconds, not the library's minutes: runners
 * check each other's health every 2 s with a short ping, re-read shard
 * assignments every second, and poll for unprocessed messages every second.
 *
 * @since 0.1.0
 */
import * as MessageStorage from "@effect/cluster/MessageStorage"
import * as RunnerAddress from "@effect/cluster/RunnerAddress"
import * as RunnerHealth from "@effect/cluster/RunnerHealth"
import * as Runners from "@effect/cluster/Runners"
import * as Sharding from "@effect/cluster/Sharding"
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import * as SocketRunner from "@effect/cluster/SocketRunner"
import * as SqlMessageStorage from "@effect/cluster/SqlMessageStorage"
import * as SqlRunnerStorage from "@effect/cluster/SqlRunnerStorage"
import { NodeClusterSocket } from "@effect/platform-node"
import type * as SocketServer from "@effect/platform/SocketServer"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"

/**
 * Intervals tuned for a fast failover (see the module's comment).
 *
 * @since 0.1.0
 */
export const fastFailover: Partial<ShardingConfig.ShardingConfig["Type"]> = {
  runnerHealthCheckInterval: Duration.seconds(2),
  refreshAssignmentsInterval: Duration.seconds(1),
  entityMessagePollInterval: Duration.seconds(1),
  entityReplyPollInterval: Duration.millis(100),
  shardLockRefreshInterval: Duration.seconds(2),
  shardLockExpiration: Duration.seconds(8),
  entityTerminationTimeout: Duration.seconds(5)
}

/**
 * A runner is dead when two short pings in a row find nothing (the
 * library's own check retries five times with 10 s timeouts).
 *
 * @since 0.1.0
 */
export const healthPing: Layer.Layer<RunnerHealth.RunnerHealth, never, Runners.Runners> = Layer.effect(
  RunnerHealth.RunnerHealth,
  Effect.map(Runners.Runners, (runners) =>
    RunnerHealth.RunnerHealth.of({
      isAlive: (address) =>
        runners.ping(address).pipe(
          Effect.timeout("1500 millis"),
          Effect.retry({ times: 2, schedule: Schedule.spaced("300 millis") }),
          Effect.isSuccess
        )
    }))
)

/**
 * @since 0.1.0
 */
export interface SingleOptions {
  readonly shardingConfig?: Partial<ShardingConfig.ShardingConfig["Type"]> | undefined
}

/**
 * One runner on one machine (`SingleRunner` without its `layerFromEnv`):
 * messages and shard locks in SQL, so a restarted process takes over the
 * unprocessed ones.
 *
 * @since 0.1.0
 */
export const single = (
  options: SingleOptions = {}
): Layer.Layer<Sharding.Sharding | Runners.Runners | MessageStorage.MessageStorage, never, SqlClient.SqlClient> =>
  Sharding.layer.pipe(
    Layer.provideMerge(Runners.layerNoop),
    Layer.provideMerge(Layer.orDie(SqlMessageStorage.layer)),
    Layer.provide([Layer.orDie(SqlRunnerStorage.layer), RunnerHealth.layerNoop]),
    Layer.provide(ShardingConfig.layer({ ...fastFailover, ...options.shardingConfig }))
  )

/**
 * @since 0.1.0
 */
export interface SocketOptions {
  /** Where other runners reach this one. */
  readonly runnerAddress: { readonly host: string; readonly port: number }
  /** Where it listens, when not `runnerAddress` (e.g. `0.0.0.0` behind NAT). */
  readonly listenAddress?: { readonly host: string; readonly port: number } | undefined
  readonly shardingConfig?: Partial<ShardingConfig.ShardingConfig["Type"]> | undefined
}

/**
 * One of several runners sharing a database (Postgres): runners message
 * each other over TCP (msgpack), and a dead one's shards move to the rest.
 *
 * @since 0.1.0
 */
export const socket = (
  options: SocketOptions
): Layer.Layer<
  Sharding.Sharding | Runners.Runners | MessageStorage.MessageStorage,
  SocketServer.SocketServerError,
  SqlClient.SqlClient
> => {
  const config = ShardingConfig.layer({
    ...fastFailover,
    ...options.shardingConfig,
    runnerAddress: Option.some(RunnerAddress.make(options.runnerAddress.host, options.runnerAddress.port)),
    runnerListenAddress: Option.map(
      Option.fromNullable(options.listenAddress),
      (a) => RunnerAddress.make(a.host, a.port)
    )
  })
  const health = healthPing.pipe(Layer.provide(Runners.layerRpc), Layer.provide(NodeClusterSocket.layerClientProtocol))
  return SocketRunner.layer.pipe(
    Layer.provide([NodeClusterSocket.layerSocketServer, NodeClusterSocket.layerClientProtocol]),
    Layer.provide(health),
    Layer.provideMerge(Layer.orDie(SqlMessageStorage.layer)),
    Layer.provide(Layer.orDie(SqlRunnerStorage.layer)),
    Layer.provide(config),
    Layer.provide(RpcSerialization.layerMsgPack)
  )
}
