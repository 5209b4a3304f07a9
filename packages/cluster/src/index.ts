/**
 * skein sessions as `@effect/cluster` entities: many runners behind one
 * HTTP API, and a dead runner's sessions resumed on another.
 *
 * @since 0.1.0
 */
export * as ClusterAsks from "./ClusterAsks.js"
export * as ClusterError from "./ClusterError.js"
export * as ClusterRegistry from "./ClusterRegistry.js"
export * as ClusterRunner from "./ClusterRunner.js"
export * as ClusterServe from "./ClusterServe.js"
export * as RunnerSessions from "./RunnerSessions.js"
export * as SessionEntity from "./SessionEntity.js"
export * as SessionHost from "./SessionHost.js"
export * as TurnLedger from "./TurnLedger.js"
