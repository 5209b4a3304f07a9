/**
 * skein serve: an opencode-compatible HTTP/SSE server over Claude Code sessions.
 *
 *   npx tsx examples/serve.ts [--port N] [--hostname H] [--root DIR …] [--fake-model]
 *
 * Prints `listening on http://HOST:PORT` once it accepts connections. The
 * token comes from SKEIN_SERVER_TOKEN, or is generated and stored 0600 under
 * the state folder (printed once). opencode's clients pass it as
 * OPENCODE_SERVER_PASSWORD (basic auth, any user name).
 *
 * By default the CLIs it starts use the user's own Claude Code login and
 * settings and inherit this process's environment (ANTHROPIC_BASE_URL
 * included). `--fake-model` starts the embedded FakeModel and points the
 * CLIs at it, with a private config folder: a demo with no key.
 */
import { Command, Options } from "@effect/cli"
import * as HttpServer from "@effect/platform/HttpServer"
import { NodeContext, NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { ProcessHost, SlicedScheduler } from "@skein/kernel"
import { Serve, Token } from "@skein/serve"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Console, Effect, Layer, Option } from "effect"
import { createServer } from "node:http"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

const port = Options.integer("port").pipe(Options.withDefault(4096))
const hostname = Options.text("hostname").pipe(Options.withDefault("127.0.0.1"))
const roots = Options.directory("root").pipe(Options.repeated)
const fakeModel = Options.boolean("fake-model")

const configRootOf = () => process.env.CLAUDE_CONFIG_DIR ?? Path.join(Os.homedir(), ".claude")

const run = Effect.fn("serve")(function*(args: {
  readonly port: number
  readonly hostname: string
  readonly roots: ReadonlyArray<string>
  readonly fakeModel: boolean
}) {
  const model = args.fakeModel ? Option.some(yield* FakeModel.make()) : Option.none()
  const dirs = Option.isSome(model) ? Option.some(yield* ClaudeCli.offlineDirs("skein-serve-demo-")) : Option.none()
  const configDir = Option.match(dirs, { onNone: configRootOf, onSome: (d) => d.configDir })
  const stateDir = Path.join(configDir, "skein", "serve")
  const session = Option.match(Option.all({ model, dirs }), {
    onNone: () => ({}),
    onSome: ({ dirs, model }) => ({ env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: dirs.configDir, tmpDir: dirs.tmpDir }) })
  })
  const { file, token } = yield* Token.resolve({ hostname: args.hostname, stateDir })
  if (file !== undefined) yield* Console.log(`token (stored in ${file}): ${token}`)
  const rootList = args.roots.length > 0 ? args.roots : [Option.match(dirs, { onNone: () => process.cwd(), onSome: (d) => d.cwd })]
  for (const root of rootList) Fs.mkdirSync(root, { recursive: true })

  const layer = Serve.layer({ token, roots: rootList, configDir, stateDir, session }).pipe(
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: args.port, host: args.hostname })),
    Layer.provide(Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer))
  )
  yield* Layer.launch(
    Layer.effectDiscard(HttpServer.addressWith((address) =>
      Console.log(`listening on http://${address._tag === "TcpAddress" ? `${args.hostname}:${address.port}` : address.path}`)
    )).pipe(Layer.provide(layer))
  )
})

const command = Command.make("serve", { port, hostname, roots, fakeModel }, (args) => Effect.scoped(run(args)))

// On the sliced scheduler, as `skein serve` runs.
Command.run(command, { name: "skein serve", version: "0.0.0" })(process.argv).pipe(
  Effect.provide(Layer.merge(NodeContext.layer, SlicedScheduler.layer())),
  NodeRuntime.runMain
)
