/**
 * `skein memory list|add|repair` and `skein dream`: a project's auto-memory
 * folder (`<config root>/projects/<project>/memory/`, which the CLI loads
 * into every session) and skein's memory jobs over it.
 *
 * `add` runs one turn that states a fact, then the extraction worker that
 * saves it as a memory with its index line; `dream` runs a consolidation by
 * hand (past the time and activity gates, still behind the lock). Both need
 * a model: the person's own login, or `--fake-model`, which plays the
 * workers' tool calls offline.
 */
import { Command, HelpDoc, Options } from "@effect/cli"
import { TaskManager } from "@skein/kernel"
import { Dream, Extraction, MemoryEvents, MemoryFile, MemoryFolder } from "@skein/memory"
import { Permissions, Session, Turn, Worker } from "@skein/session"
import { SessionIndex, TranscriptLayout, TranscriptStore } from "@skein/store"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Console, Effect, Layer, Option, Queue, Schema } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fail, oneLine } from "./CliError.js"
import * as Argv from "./internal/argv.js"
import * as Lookup from "./internal/lookup.js"
import * as Progress from "./Progress.js"
import * as Run from "./Run.js"

// ---------------------------------------------------------------------------
// Options and the folder
// ---------------------------------------------------------------------------

const where = {
  root: Lookup.rootOption,
  cwd: Options.directory("cwd").pipe(Options.withDescription("the project's folder (default: the current one)"), Options.optional)
}
const json = Options.boolean("json").pipe(Options.withDescription("print JSON"))
const modelOptions = {
  fakeModel: Options.boolean("fake-model").pipe(Options.withDescription("run offline: a local fake model plays the worker")),
  claude: Options.file("claude").pipe(Options.withDescription("the Claude Code executable"), Options.optional)
}

interface Where {
  readonly root: Option.Option<string>
  readonly cwd: Option.Option<string>
}

const placeOf = (options: Where) =>
  Effect.gen(function*() {
    const configDir = yield* Lookup.rootOf(options.root)
    const cwd = yield* TranscriptLayout.canonicalCwd(Path.resolve(Option.getOrElse(options.cwd, () => process.cwd())))
    return { configDir, cwd, dir: MemoryFolder.directory(configDir, cwd) }
  })

const problemLine = (p: MemoryFolder.Problem): string => {
  switch (p._tag) {
    case "LineTooLong":
      return `MEMORY.md line ${p.line}: ${p.chars} characters, over the limit`
    case "IndexTooLarge":
      return `MEMORY.md is ${p.bytes} bytes, over the limit`
    case "DanglingEntry":
      return `MEMORY.md line ${p.line}: ${p.file} does not exist`
    case "DuplicateEntry":
      return `MEMORY.md line ${p.line}: ${p.file} is listed twice`
    case "Unindexed":
      return `${p.file} is not in MEMORY.md`
    case "NotAnEntry":
      return `MEMORY.md line ${p.line} is not an entry: ${p.text}`
    case "InvalidMemory":
      return `${p.file}: ${p.reason}`
  }
}

const ioFail = (e: MemoryFolder.MemoryIoError) => fail(oneLine(e.message))

const printFolder = (dir: string, asJson: boolean) =>
  Effect.gen(function*() {
    const snapshot = yield* MemoryFolder.read(dir).pipe(Effect.mapError(ioFail))
    const problems = MemoryFolder.validate(snapshot)
    if (asJson) {
      return yield* Console.log(JSON.stringify({
        directory: dir,
        memories: [...snapshot.memories].map(([file, m]) => ({ file, name: m.name, type: m.type, description: m.description })),
        index: snapshot.index.map((line) => line.raw),
        indexBytes: snapshot.indexBytes,
        problems
      }))
    }
    yield* Console.log(`${dir}: ${snapshot.memories.size} memories, MEMORY.md ${snapshot.indexBytes} bytes`)
    for (const [file, m] of snapshot.memories) yield* Console.log(`  ${file}  [${m.type}] ${m.description}`)
    for (const problem of problems) yield* Console.log(`  ! ${problemLine(problem)}`)
  })

// ---------------------------------------------------------------------------
// A session to fork the memory workers from
// ---------------------------------------------------------------------------

const isWorker = (marker: string): FakeModel.RequestMatch => (request) =>
  FakeModel.isConversation(request) && FakeModel.messagesText(request).includes(marker)
const isMain: FakeModel.RequestMatch = (request) =>
  FakeModel.isConversation(request) && !FakeModel.messagesText(request).includes("skein memory")

/** The services the memory jobs need, over the config root. */
const services = (configDir: string) =>
  Layer.mergeAll(
    TranscriptStore.layer,
    SessionIndex.layer,
    TaskManager.layer({ root: Path.join(configDir, "skein", "memory") }),
    MemoryEvents.layer
  ).pipe(Layer.provideMerge(TranscriptLayout.layer(configDir)))

interface ModelOptions {
  readonly fakeModel: boolean
  readonly claude: Option.Option<string>
}

/**
 * A session of the project with one turn of `prompt`, its worker pool, and
 * `job` over them. With `--fake-model` the model answers the main turn and
 * plays `replies` for the worker; otherwise the person's own login runs both.
 */
const withSession = <A, E, R>(
  place: { readonly configDir: string; readonly cwd: string; readonly dir: string },
  options: ModelOptions,
  replies: ReadonlyArray<FakeModel.Reply>,
  prompt: string,
  job: (workers: Worker.Workers, launch: Session.SessionOptions) => Effect.Effect<A, E, R>
) =>
  Effect.gen(function*() {
    const offline = options.fakeModel
      ? Option.some({
        model: yield* FakeModel.make({ replies: [FakeModel.matching(FakeModel.text("Noted."), isMain), ...replies] }),
        dirs: yield* ClaudeCli.offlineDirs("skein-memory-")
      })
      : Option.none()
    const launch: Session.SessionOptions = {
      cwd: place.cwd,
      configDir: place.configDir,
      env: Option.getOrUndefined(Option.map(offline, ({ dirs, model }) =>
        ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: place.configDir, tmpDir: dirs.tmpDir })
      )),
      executable: Option.getOrUndefined(options.claude),
      bare: false,
      stopTimeouts: { stdinGrace: "1 second", termGrace: "2 seconds" }
    }
    const parent = yield* Session.start(launch).pipe(
      Effect.provide(Permissions.layer(() => Effect.succeed(Permissions.deny("the main turn of a memory job runs no tools")))),
      Effect.mapError(Run.describe)
    )
    const summary = yield* Effect.flatMap(parent.send(prompt), (t) => t.result).pipe(Effect.mapError(Run.describe))
    // skein's own session, not the person's: `sessions list` hides it, as it hides the workers.
    const index = yield* SessionIndex.SessionIndex
    yield* Effect.flatMap(parent.sessionId, (id) => index.markWorker(id, { label: "memory job" })).pipe(Effect.ignore)
    // A main turn that failed (no login) fails the job before any worker is forked.
    yield* Turn.succeeded(summary).pipe(Effect.mapError(Run.describe))
    const workers = yield* Worker.pool(parent, { launch })
    return yield* job(workers, launch)
  })

/** Prints the jobs' events; a job that failed fails the command with its reason. */
const printEvents = (events: Queue.Dequeue<MemoryEvents.MemoryEvent>, asJson: boolean) =>
  Effect.flatMap(Queue.takeAll(events), (all) =>
    Effect.zipRight(
      Effect.forEach(all, (event) =>
        asJson || event._tag === "Failed" ? Effect.void : Console.log(`${event.job}: ${event._tag.toLowerCase()}${
          event._tag === "Wrote" ? ` ${event.files.length === 0 ? "(no changes)" : event.files.join(", ")}` : "reason" in event ? ` (${event.reason})` : ""
        }`), { discard: true }),
      Effect.forEach(all, (event) => event._tag === "Failed" ? Effect.fail(fail(`memory ${event.job} failed: ${oneLine(event.reason)}`)) : Effect.void, {
        discard: true
      })
    ))

const slugOf = (text: string): string => text.toLowerCase().replace(/[^a-z0-9]+/g, " ").trim().split(" ").slice(0, 5).join("-") || "fact"

/** The worker's tool calls FakeModel plays for `add`: write the memory, read the index, write it with the new line. */
const addReplies = (dir: string, fact: string): ReadonlyArray<FakeModel.Reply> => {
  const memory = Schema.decodeSync(MemoryFile.Memory)({ name: slugOf(fact), description: fact, type: "project", body: fact })
  const index = Option.getOrElse(Option.liftThrowable(() => Fs.readFileSync(Path.join(dir, MemoryFolder.indexName), "utf8"))(), () => "")
  const line = MemoryFile.renderLine({ title: fact, file: MemoryFile.fileName(memory), hook: "saved by skein memory add" }, 150)
  const worker = isWorker("skein memory extraction.")
  return [
    FakeModel.matching(FakeModel.toolUse("Write", { file_path: Path.join(dir, MemoryFile.fileName(memory)), content: MemoryFile.render(memory) }), worker),
    FakeModel.matching(FakeModel.toolUse("Read", { file_path: Path.join(dir, MemoryFolder.indexName) }), worker),
    FakeModel.matching(FakeModel.toolUse("Write", { file_path: Path.join(dir, MemoryFolder.indexName), content: `${index}${line}\n` }), worker),
    FakeModel.matching(FakeModel.text("Saved."), worker)
  ]
}

const dreamReplies = (dir: string): ReadonlyArray<FakeModel.Reply> => {
  const worker = isWorker("skein memory consolidation (dream).")
  return [
    FakeModel.matching(FakeModel.toolUse("Bash", { command: `ls ${dir}`, description: "orient" }), worker),
    FakeModel.matching(FakeModel.text("The memories do not overlap; nothing to merge."), worker)
  ]
}

/** Runs `effect` with the memory services, a subscription to their events, and progress on a terminal. */
const job = <A, E, R>(configDir: string, label: string, effect: (events: Queue.Dequeue<MemoryEvents.MemoryEvent>) => Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const events = yield* Effect.flatMap(MemoryEvents.MemoryEvents, (e) => e.subscribe)
    return yield* Progress.withProgress(label)(effect(events))
  }).pipe(
    Effect.scoped,
    Effect.provide(services(configDir)),
    Effect.catchTag("TaskStoreError", () => fail(`could not keep the memory jobs' task records under ${configDir}/skein/memory`))
  )

const withExample = (description: string, example: string) => HelpDoc.blocks([HelpDoc.p(description), HelpDoc.p(`Example: ${example}`)])

// ---------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------

const listOptions = { ...where, json }

const list = Command.make("list", listOptions, (options) =>
  Effect.flatMap(placeOf(options), (place) => printFolder(place.dir, options.json))).pipe(
    Command.withDescription(withExample("List a project's memories and what the index check finds.", "skein memory list --json"))
  )

const addOptions = { ...where, ...modelOptions, json }

const add = Command.make("add", { ...addOptions, fact: Options.text("fact").pipe(Options.withDescription("what to remember")) }, (options) =>
  Effect.gen(function*() {
    const place = yield* placeOf(options)
    yield* job(place.configDir, "saving the memory", (events) =>
      Effect.gen(function*() {
        yield* withSession(place, options, addReplies(place.dir, options.fact), `Please remember: ${options.fact}`, (workers, launch) =>
          Effect.flatMap(Extraction.make({ workers, launch }), (extraction) => extraction.extract))
        yield* printEvents(events, options.json)
      }))
    yield* printFolder(place.dir, options.json)
  })).pipe(Command.withDescription(withExample(
    "State a fact in a turn of the project's session, then run the extraction worker, which saves it as a memory.",
    "skein memory add --fact \"we deploy on Tuesdays only\""
  )))

const repairOptions = { ...where, json }

const repair = Command.make("repair", repairOptions, (options) =>
  Effect.gen(function*() {
    const place = yield* placeOf(options)
    const done = yield* MemoryFolder.repair(place.dir).pipe(Effect.mapError(ioFail))
    if (options.json) return yield* Console.log(JSON.stringify(done))
    yield* Console.log(`fixed ${done.fixed.length}, left ${done.remaining.length}`)
    for (const problem of done.remaining) yield* Console.log(`  ! ${problemLine(problem)}`)
  })).pipe(Command.withDescription(withExample(
    "Fix what can be fixed mechanically in MEMORY.md (long lines, dangling and duplicate entries).",
    "skein memory repair"
  )))

export const memory = Command.make("memory").pipe(
  Command.withDescription(withExample("A project's auto-memory folder: list, add, repair.", "skein memory list")),
  Command.withSubcommands([list, add, repair])
)

const dreamOptions = { ...where, ...modelOptions, json }

export const dream = Command.make("dream", dreamOptions, (options) =>
  Effect.gen(function*() {
    const place = yield* placeOf(options)
    const record = yield* job(place.configDir, "dreaming", (events) =>
      Effect.gen(function*() {
        const record = yield* withSession(place, options, dreamReplies(place.dir), "hello", (workers, launch) =>
          Effect.gen(function*() {
            const tasks = yield* TaskManager.TaskManager
            const d = yield* Dream.make({ workers, launch })
            return yield* tasks.await((yield* d.run).id)
          }))
        yield* printEvents(events, options.json)
        return record
      }))
    if (record.status !== "completed") return yield* fail(`the dream ${record.id} ${record.status}${record.error === undefined ? "" : `: ${oneLine(record.error)}`}`)
    if (options.json) return yield* Console.log(JSON.stringify(record))
    yield* Console.log(`dream ${record.id} ${record.status}: ${JSON.stringify(record.result ?? null)}`)
    yield* printFolder(place.dir, false)
  })).pipe(Command.withDescription(withExample(
    "Consolidate the project's memories now: past the time and activity gates, still behind the lock.",
    "skein dream --cwd ~/src/app"
  )))

export const memorySpec: Argv.Spec = Argv.group("memory", {
  list: listOptions,
  add: { ...addOptions, fact: Options.text("fact") },
  repair: repairOptions
})

export const dreamSpec: Argv.Spec = Argv.leaf("dream", dreamOptions)


