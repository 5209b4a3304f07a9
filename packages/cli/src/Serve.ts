/**
 * `skein serve`: @skein/serve's opencode-compatible HTTP/SSE server over
 * Claude Code sessions. By default the CLIs it starts use the person's own
 * login and settings; `--fake-model` points them at a local fake model with
 * a private config folder, a demo with no key.
 */
import { Command, HelpDoc, Options } from "@effect/cli"
import * as HttpServer from "@effect/platform/HttpServer"
import { NodeHttpServer } from "@effect/platform-node"
import { TranscriptLayout } from "@skein/store"
import { Serve, Token } from "@skein/serve"
import { SqlStore } from "@skein/sql"
import { ClaudeCli } from "@skein/testkit"
import { Console, Duration, Effect, Layer, Option, Redacted } from "effect"
import * as Fs from "node:fs"
import { createServer } from "node:http"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Crypto from "node:crypto"
import { fail, oneLine } from "./CliError.js"
import * as Argv from "./internal/argv.js"
import * as ClusterCli from "./internal/cluster.js"
import * as FakeModel from "./internal/fakeModel.js"

const serveOptions = {
  port: Options.integer("port").pipe(Options.withDescription("the port to listen on (0: any free port)"), Options.withDefault(4096)),
  hostname: Options.text("hostname").pipe(
    Options.withDescription("the address to listen on; beyond loopback a token must be set (SKEIN_SERVER_TOKEN)"),
    Options.withDefault("127.0.0.1")
  ),
  roots: Options.directory("root").pipe(
    Options.withDescription("a folder sessions may run in (repeatable; default: the current one)"),
    Options.repeated
  ),
  allowHosts: Options.text("allow-host").pipe(
    Options.withDescription("a name clients may reach the server by besides the loopback ones (repeatable); other Host headers get 403"),
    Options.repeated
  ),
  silenceTimeout: Options.integer("silence-timeout").pipe(
    Options.withDescription("seconds a CLI may say nothing during a turn before its session is stopped (default 900)"),
    Options.optional
  ),
  fakeModel: Options.boolean("fake-model").pipe(
    Options.withDescription("run the CLIs offline against a local fake model, with a throwaway config folder")
  ),
  otel: Options.text("otel").pipe(
    Options.withDescription("send traces to this OTLP/HTTP collector (e.g. http://localhost:4318); off by default"),
    Options.optional
  ),
  store: Options.text("store").pipe(
    Options.withDescription(
      "keep session state in SQL: sqlite:<file> or postgres://… (event log, session catalog, pending asks, transcript mirror; default: files under the config folder)"
    ),
    Options.optional
  ),
  ...ClusterCli.options
} as const

interface ServeConfig {
  readonly port: number
  readonly hostname: string
  readonly roots: ReadonlyArray<string>
  readonly allowHosts: ReadonlyArray<string>
  readonly silenceTimeout: Option.Option<number>
  readonly fakeModel: boolean
  readonly otel: Option.Option<string>
  readonly store: Option.Option<string>
  readonly cluster: Option.Option<string>
  readonly runnerAddress: Option.Option<string>
  readonly turnDrain: Option.Option<number>
}

/**
 * OTLP tracing for the whole server when `--otel` is given. The OpenTelemetry
 * SDK is loaded only then, so a server (or any other command) without it
 * pays nothing for it.
 */
const tracing = (otel: Option.Option<string>): Layer.Layer<never> =>
  Option.match(otel, {
    onNone: () => Layer.empty,
    onSome: (url) =>
      Layer.unwrapEffect(
        Effect.map(Effect.promise(() => import("@skein/runtime/Tracing")), (Tracing) => Tracing.layerOtlp({ url, serviceName: "skein-serve" }))
      )
  })

/** Where `--fake-model` keeps its throwaway folders, one per server, each named `<pid>-<random>`. */
export const throwawayParent = (tmp: string = Os.tmpdir()) => Path.join(tmp, "skein-serve-fake-model")

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    // EPERM: a process of someone else's runs under that pid.
    return e instanceof Error && "code" in e && e.code === "EPERM"
  }
}

/**
 * Removes the folders of servers that are gone: one killed (SIGKILL) could
 * not remove its own, and the next start finds it here.
 */
export const sweepThrowaways = (parent: string) => {
  const entries = Fs.existsSync(parent) ? Fs.readdirSync(parent) : []
  for (const name of entries) {
    const pid = Number(/^(\d+)-/.exec(name)?.[1])
    if (Number.isInteger(pid) && pid !== process.pid && !alive(pid)) Fs.rmSync(Path.join(parent, name), { recursive: true, force: true })
  }
}

/** This server's throwaway folders (config, cwd, tmp), removed when it stops, and by the next start if it is killed. */
const throwawayDirs = Effect.acquireRelease(
  Effect.sync((): ClaudeCli.OfflineDirs => {
    const parent = throwawayParent()
    sweepThrowaways(parent)
    const root = Path.join(parent, `${process.pid}-${Crypto.randomBytes(4).toString("hex")}`)
    const make = (name: string) => {
      const dir = Path.join(root, name)
      Fs.mkdirSync(dir, { recursive: true })
      return dir
    }
    return { root, configDir: make("config"), cwd: make("cwd"), tmpDir: make("tmp") }
  }),
  (dirs) => Effect.sync(() => Fs.rmSync(dirs.root, { recursive: true, force: true }))
)

/** The config folder and session options: the person's own, or offline ones. */
const target = (fakeModel: boolean) =>
  Effect.gen(function*() {
    if (!fakeModel) return { configDir: yield* Effect.orDie(TranscriptLayout.rootConfig), session: {}, cwd: process.cwd() }
    const model = yield* FakeModel.start.pipe(Effect.mapError((e) => fail(`the fake model could not start: ${e.message}`)))
    const dirs = yield* throwawayDirs
    const env = ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: dirs.configDir, tmpDir: dirs.tmpDir })
    return { configDir: dirs.configDir, session: { env, bare: true }, cwd: dirs.cwd }
  })

const listen = Effect.fn("Serve.listen")(function*(config: ServeConfig) {
  if (Option.isNone(config.cluster) && Option.isSome(config.turnDrain)) return yield* fail("--turn-drain needs --cluster")
  const where = yield* target(config.fakeModel)
  const stateDir = Path.join(where.configDir, "skein", "serve")
  const resolved = yield* Token.resolve({ hostname: config.hostname, stateDir }).pipe(
    Effect.mapError((e) =>
      e._tag === "TokenRequired"
        ? fail(`listening on ${e.hostname} needs a token: set SKEIN_SERVER_TOKEN`)
        : fail(`could not store the token under ${stateDir}: ${oneLine(e.message)}`)
    )
  )
  const roots = config.roots.length > 0 ? config.roots.map((r) => Path.resolve(r)) : [where.cwd]
  for (const root of roots) Fs.mkdirSync(root, { recursive: true })
  // The name it was told to listen on is one clients use; a wildcard names nothing.
  const named = Token.isLoopback(config.hostname) || config.hostname === "0.0.0.0" || config.hostname === "::" ? [] : [config.hostname]
  // With --store, serve's event log, catalog and asks are rows in that database, and each transcript is
  // mirrored there: a server on another config folder (another machine) continues the sessions (see @skein/sql).
  const store = Option.match(config.store, {
    onNone: () => Layer.empty,
    onSome: (url) => Layer.mapError(SqlStore.layer(url), (e) => fail(oneLine(e.message)))
  })
  const serveConfig: Serve.Options = {
    token: resolved.token,
    roots,
    hosts: [...named, ...config.allowHosts],
    silenceTimeout: Option.getOrUndefined(Option.map(config.silenceTimeout, (seconds) => Duration.seconds(seconds))),
    configDir: where.configDir,
    stateDir,
    session: where.session
  }
  const server = (Option.isSome(config.cluster)
    ? yield* ClusterCli.layer(serveConfig, config.cluster.value, config.runnerAddress, config.turnDrain)
    : Serve.layer(serveConfig).pipe(Layer.provide(store))).pipe(
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: config.port, host: config.hostname }))
  )
  const announce = Layer.effectDiscard(HttpServer.addressWith((address) =>
    Console.log(
      address._tag === "TcpAddress" ? `listening on http://${config.hostname}:${address.port}` : `listening on ${address.path}`
    ).pipe(Effect.zipRight(Console.log(
      // A token the person gave is theirs already: it is not printed.
      resolved.file === undefined ? "token: from SKEIN_SERVER_TOKEN" : `token: ${Redacted.value(resolved.token)} (stored in ${resolved.file})`
    )))
  ))
  return yield* Layer.launch(Layer.provide(announce, server)).pipe(
    Effect.catchTag("ServeError", (e) => fail(`could not listen on ${config.hostname}:${config.port}: ${oneLine(String(e.cause))}`))
  )
})

export const serve = Command.make("serve", serveOptions, (config) =>
  Effect.scoped(listen(config)).pipe(Effect.provide(tracing(config.otel)))).pipe(
  Command.withDescription(HelpDoc.blocks([
    HelpDoc.p(
      "Serve Claude Code sessions over HTTP and SSE, opencode-compatible; prints its URL and token. " +
        "Clients pass the token as OPENCODE_SERVER_PASSWORD (basic auth). Ctrl-C stops it."
    ),
    HelpDoc.p("Example: skein serve --port 4096 --root ~/src/app --otel http://localhost:4318"),
    HelpDoc.p(
      "With --cluster, sessions are @effect/cluster entities: every runner sharing the database serves every session, " +
        "and a dead runner's sessions go on elsewhere. Example: skein serve --cluster postgres://… --runner-address 10.0.0.2:34431. " +
        "A turn whose session moves to a runner that joins may finish first, for up to --turn-drain seconds (default 60)"
    )
  ]))
)

export const serveSpec: Argv.Spec = Argv.leaf("serve", serveOptions)
