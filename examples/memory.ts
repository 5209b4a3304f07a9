/**
 * The auto-memory folder of a project, and skein's memory jobs over it,
 * offline: the real Claude Code CLI talks only to FakeModel on 127.0.0.1,
 * which plays the workers' tool calls.
 *
 *   npx tsx examples/memory.ts list    --config <dir> --cwd <dir>
 *   npx tsx examples/memory.ts extract --config <dir> --cwd <dir> --fact "we deploy on Tuesdays only"
 *   npx tsx examples/memory.ts dream   --config <dir> --cwd <dir>
 *
 * `list` prints the memories and what the index check finds. `extract` runs
 * one turn that states the fact, then an extraction worker that saves it as
 * a memory with its index line. `dream` runs a consolidation by hand (past
 * the time and activity gates, still behind the lock). `--config` is the
 * CLI's config root (CLAUDE_CONFIG_DIR) and `--cwd` the project; both are
 * created if missing, and a plain `claude` with the same two loads the result.
 */
import { Command, Options } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { ProcessHost, TaskManager } from "@skein/kernel"
import { Dream, Extraction, MemoryEvents, MemoryFile, MemoryFolder } from "@skein/memory"
import { Session, Worker } from "@skein/session"
import { SessionIndex, TranscriptLayout, TranscriptStore } from "@skein/store"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Console, Effect, Layer, Option, Queue, Schema, type Scope } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

const isWorker = (marker: string): FakeModel.RequestMatch => (request) =>
  FakeModel.isConversation(request) && FakeModel.messagesText(request).includes(marker)
const isMain: FakeModel.RequestMatch = (request) =>
  FakeModel.isConversation(request) && !FakeModel.messagesText(request).includes("skein memory")

const slugOf = (text: string): string =>
  text.toLowerCase().replace(/[^a-z0-9]+/g, " ").trim().split(" ").slice(0, 5).join("-") || "fact"

const list = (configDir: string, cwd: string) =>
  Effect.gen(function*() {
    const dir = MemoryFolder.directory(configDir, cwd)
    const snapshot = yield* MemoryFolder.read(dir)
    yield* Console.log(`${dir}: ${snapshot.memories.size} memories, MEMORY.md ${snapshot.indexBytes} bytes`)
    for (const [file, m] of snapshot.memories) yield* Console.log(`  ${file}  [${m.type}] ${m.description}`)
    for (const line of snapshot.index) yield* Console.log(`  | ${line.raw}`)
    for (const problem of MemoryFolder.validate(snapshot)) yield* Console.log(`  ! ${JSON.stringify(problem)}`)
  })

/** A session of the project against `model`, with the services the memory jobs need. */
const withSession = <A, E, R>(
  configDir: string,
  cwd: string,
  replies: (memoryDir: string) => ReadonlyArray<FakeModel.Reply>,
  prompt: string,
  job: (workers: Worker.Workers, launch: Session.SessionOptions) => Effect.Effect<A, E, R>
) =>
  Effect.gen(function*() {
    const memoryDir = MemoryFolder.directory(configDir, cwd)
    const model = yield* FakeModel.make({ replies: [FakeModel.matching(FakeModel.text("Noted."), isMain), ...replies(memoryDir)] })
    const tmpDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-memory-example-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(tmpDir, { recursive: true, force: true })))
    const launch: Session.SessionOptions = {
      cwd,
      configDir,
      env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir, tmpDir }),
      bare: false,
      stopTimeouts: { stdinGrace: "500 millis", termGrace: "500 millis" }
    }
    const parent = yield* Session.start(launch)
    yield* Effect.flatMap(parent.send(prompt), (t) => t.result)
    const workers = yield* Worker.pool(parent, { launch })
    return yield* job(workers, launch)
  })

const services = (configDir: string) =>
  Layer.mergeAll(
    TranscriptStore.layer,
    SessionIndex.layer,
    TaskManager.layer({ root: Path.join(configDir, "skein") }),
    MemoryEvents.layer,
    ProcessHost.layerMemory()
  ).pipe(Layer.provideMerge(TranscriptLayout.layer(configDir)), Layer.provideMerge(NodeContext.layer))

const printEvents = Effect.flatMap(MemoryEvents.MemoryEvents, (events) => events.subscribe)

const extract = (configDir: string, cwd: string, fact: string) =>
  Effect.gen(function*() {
    const events = yield* printEvents
    const memory = Schema.decodeSync(MemoryFile.Memory)({ name: slugOf(fact), description: fact, type: "project", body: fact })
    const file = MemoryFolder.directory(configDir, cwd)
    const index = Option.getOrElse(
      Option.liftThrowable(() => Fs.readFileSync(Path.join(file, MemoryFolder.indexName), "utf8"))(),
      () => ""
    )
    const line = MemoryFile.renderLine({ title: fact, file: MemoryFile.fileName(memory), hook: "from examples/memory.ts" }, 150)
    const worker = isWorker("skein memory extraction.")
    yield* withSession(configDir, cwd, (dir) => [
      FakeModel.matching(FakeModel.toolUse("Write", { file_path: Path.join(dir, MemoryFile.fileName(memory)), content: MemoryFile.render(memory) }), worker),
      FakeModel.matching(FakeModel.toolUse("Read", { file_path: Path.join(dir, MemoryFolder.indexName) }), worker),
      FakeModel.matching(FakeModel.toolUse("Write", { file_path: Path.join(dir, MemoryFolder.indexName), content: `${index}${line}\n` }), worker),
      FakeModel.matching(FakeModel.text("Saved."), worker)
    ], `Please remember: ${fact}`, (workers, launch) =>
      Effect.flatMap(Extraction.make({ workers, launch }), (extraction) => extraction.extract))
    for (const event of yield* Queue.takeAll(events)) yield* Console.log(JSON.stringify(event))
    yield* list(configDir, cwd)
  })

const dream = (configDir: string, cwd: string) =>
  Effect.gen(function*() {
    const events = yield* printEvents
    const worker = isWorker("skein memory consolidation (dream).")
    const record = yield* withSession(configDir, cwd, (dir) => [
      FakeModel.matching(FakeModel.toolUse("Bash", { command: `ls ${dir}`, description: "orient" }), worker),
      FakeModel.matching(FakeModel.text("The memories do not overlap; nothing to merge."), worker)
    ], "hello", (workers, launch) =>
      Effect.gen(function*() {
        const tasks = yield* TaskManager.TaskManager
        const d = yield* Dream.make({ workers, launch })
        return yield* tasks.await((yield* d.run).id)
      }))
    for (const event of yield* Queue.takeAll(events)) yield* Console.log(JSON.stringify(event))
    yield* Console.log(`task ${record.id} ${record.status}: ${JSON.stringify(record.result ?? record.error ?? null)}`)
    yield* list(configDir, cwd)
  })

const config = Options.directory("config").pipe(Options.withDescription("the CLI's config root (CLAUDE_CONFIG_DIR)"))
const cwd = Options.directory("cwd").pipe(Options.withDescription("the project's working directory"))
const fact = Options.text("fact").pipe(Options.withDefault("we deploy on Tuesdays only"))

const prepare = (c: string, w: string) => {
  Fs.mkdirSync(c, { recursive: true })
  Fs.mkdirSync(w, { recursive: true })
  return { configDir: Path.resolve(c), cwd: Fs.realpathSync(w) }
}

type Services = Layer.Layer.Success<ReturnType<typeof services>>

const run = <A, E>(c: string, w: string, f: (configDir: string, cwd: string) => Effect.Effect<A, E, Services | Scope.Scope>) => {
  const p = prepare(c, w)
  return Effect.scoped(f(p.configDir, p.cwd)).pipe(Effect.provide(services(p.configDir)))
}

const command = Command.make("memory").pipe(
  Command.withSubcommands([
    Command.make("list", { config, cwd }, ({ config, cwd }) => run(config, cwd, list)),
    Command.make("extract", { config, cwd, fact }, ({ config, cwd, fact }) => run(config, cwd, (c, w) => extract(c, w, fact))),
    Command.make("dream", { config, cwd }, ({ config, cwd }) => run(config, cwd, dream))
  ]),
  Command.withDescription("skein's memory jobs over a project's auto-memory folder, offline.")
)

Command.run(command, { name: "skein-memory", version: "0.0.0" })(process.argv).pipe(
  Effect.provide(NodeContext.layer),
  NodeRuntime.runMain
)
