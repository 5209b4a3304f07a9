/**
 * `skein serve --cluster <url> [--runner-address HOST:PORT]`: the server as
 * one runner of a cluster (see @skein/cluster). `sqlite:<file>` is the
 * cluster on one machine (a single runner, restarted in place);
 * `postgres://…` is one of many runners, each at its own runner address.
 * `--turn-drain S` bounds how long a turn whose session moves to a joining
 * runner may go on before it is cut.
 */
import { Options } from "@effect/cli"
import type { ClusterServe } from "@skein/cluster"
import type { Serve } from "@skein/serve"
import { SqlStore } from "@skein/sql"
import { Duration, Effect, Layer, Option } from "effect"
import { fail, oneLine } from "../CliError.js"

export const options = {
  cluster: Options.text("cluster").pipe(
    Options.withDescription("run as a cluster runner over this database: sqlite:<file> (one machine) or postgres://… (many runners)"),
    Options.optional
  ),
  runnerAddress: Options.text("runner-address").pipe(
    Options.withDescription("with --cluster postgres://…: HOST:PORT where other runners reach this one (default 127.0.0.1:34431)"),
    Options.optional
  ),
  turnDrain: Options.integer("turn-drain").pipe(
    Options.withDescription(
      "with --cluster: seconds a running turn may go on once its session moves to a runner that joined; past that it is cut and ends RunnerLost (default 60)"
    ),
    Options.optional
  )
} as const

const parseAddress = (text: string) => {
  const match = /^(.+):(\d+)$/.exec(text)
  return match === null ? undefined : { host: match[1]!, port: Number(match[2]) }
}

/**
 * The cluster server over `url`, its runner single (sqlite) or on a socket
 * (Postgres). @skein/cluster (and @effect/cluster under it) is loaded here,
 * not with the command: every `skein` command imports this module.
 */
export const layer = (serve: Serve.Options, url: string, runnerAddress: Option.Option<string>, turnDrain: Option.Option<number>) =>
  Effect.gen(function*() {
    const single = url.startsWith("sqlite:")
    const address = Option.getOrElse(runnerAddress, () => "127.0.0.1:34431")
    const parsed = parseAddress(address)
    if (parsed === undefined) return yield* fail(`--runner-address must be HOST:PORT, not ${address}`)
    if (single && Option.isSome(runnerAddress)) return yield* fail("--runner-address needs --cluster postgres://…; a sqlite cluster has one runner")
    if (Option.isSome(turnDrain) && turnDrain.value < 0) return yield* fail(`--turn-drain must be 0 or more seconds, not ${turnDrain.value}`)
    const runner: ClusterServe.Runner = single ? { _tag: "Single" } : { _tag: "Socket", options: { runnerAddress: parsed } }
    const { ClusterServe: Cluster } = yield* Effect.promise(() => import("@skein/cluster"))
    return Cluster.layer({ ...serve, runner, turnDrain: Option.getOrUndefined(Option.map(turnDrain, Duration.seconds)) }).pipe(
      Layer.provide(Layer.mapError(SqlStore.layer(url), (e) => fail(oneLine(e.message))))
    )
  })
