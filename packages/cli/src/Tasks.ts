/**
 * `skein tasks list|show|kill`: the background tasks of the sessions that
 * `skein run` and `skein chat` host.
 *
 * A task lives inside the CLI process that runs it, so only the skein
 * process hosting that session can stop it. Each such process keeps its
 * TaskManager (which mirrors the CLI's `task_*` messages) in a folder of its
 * own, `<config root>/skein/cli/<pid>/`, with an `owner.json`. `tasks list`
 * and `show` read those records; `kill` drops a request in the owner's
 * `kill/` folder, which the owner polls, asks its CLI to stop the task
 * (`stop_task`) and records it killed. A task whose owner has exited ended
 * with it: it is listed as `interrupted`, as a restarted TaskManager would.
 */
import { Args, Command, HelpDoc, Options } from "@effect/cli"
import * as FileSystem from "@effect/platform/FileSystem"
import { Task, TaskManager } from "@skein/kernel"
import type { Session } from "@skein/session"
import { Console, Effect, Either, Option, Schedule, Schema, type Scope } from "effect"
import * as Path from "node:path"
import { fail } from "./CliError.js"
import * as Argv from "./internal/argv.js"
import * as Lookup from "./internal/lookup.js"
import * as Progress from "./Progress.js"

// ---------------------------------------------------------------------------
// The owner's side: the folder of one skein process
// ---------------------------------------------------------------------------

const Owner = Schema.Struct({ pid: Schema.Number, cwd: Schema.String, startedAt: Schema.Number })
type Owner = Schema.Schema.Type<typeof Owner>
const decodeOwner = Schema.decodeUnknownEither(Schema.parseJson(Owner))

/** Where the skein processes of a config root keep their tasks. */
export const hostsDir = (configRoot: string) => Path.join(configRoot, "skein", "cli")

const killDir = (dir: string) => Path.join(dir, "kill")

/**
 * A TaskManager for this process's sessions, in its own folder under the
 * config root: a second skein process never recovers (and so never
 * interrupts) the tasks of a first.
 */
export const manager = (configRoot: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = Path.join(hostsDir(configRoot), String(process.pid))
    const owner: Owner = { pid: process.pid, cwd: process.cwd(), startedAt: Date.now() }
    yield* fs.makeDirectory(killDir(dir), { recursive: true, mode: 0o700 })
    yield* fs.writeFileString(Path.join(dir, "owner.json"), JSON.stringify(owner), { mode: 0o600 })
    const tasks = yield* TaskManager.make({ root: dir })
    // A process that hosted no task leaves nothing behind.
    yield* Effect.addFinalizer(() =>
      Effect.flatMap(tasks.list, (all) => all.length === 0 ? Effect.ignore(fs.remove(dir, { recursive: true })) : Effect.void)
    )
    return { dir, tasks }
  }).pipe(Effect.mapError((e) => fail(`could not keep tasks under ${configRoot}: ${e.message}`)))

/** Answers `skein tasks kill` for `session`'s tasks, polling the kill folder, for the scope's life. */
export const answerKills = (dir: string, tasks: TaskManager.TaskManager["Type"], session: Session.Session): Effect.Effect<void, never, Scope.Scope | FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const one = (id: string) =>
      Effect.gen(function*() {
        yield* Effect.ignore(fs.remove(Path.join(killDir(dir), id)))
        yield* Effect.ignore(Effect.timeout(session.stopTask(id), "5 seconds"))
        // The CLI's task_updated may have recorded it already; otherwise this does.
        yield* Effect.ignore(tasks.kill(id))
      })
    const poll = fs.readDirectory(killDir(dir)).pipe(
      Effect.flatMap((ids) => Effect.forEach(ids, one, { discard: true })),
      Effect.ignore
    )
    yield* Effect.forkScoped(Effect.repeat(poll, Schedule.spaced("250 millis")))
  })

// ---------------------------------------------------------------------------
// Reading the records of every skein process
// ---------------------------------------------------------------------------

interface Hosted {
  readonly record: Task.TaskRecord
  readonly owner: Owner
  readonly ownerLive: boolean
  readonly dir: string
  /** The status a person should see: a live task whose owner has exited ended with it. */
  readonly status: Task.TaskStatus
}

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return error instanceof Error && "code" in error && error.code === "EPERM"
  }
}

const hostedIn = (dir: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const owner = Either.getOrUndefined(decodeOwner(yield* fs.readFileString(Path.join(dir, "owner.json")).pipe(Effect.orElseSucceed(() => ""))))
    if (owner === undefined) return []
    const ownerLive = isAlive(owner.pid)
    const names = yield* fs.readDirectory(Path.join(dir, "tasks")).pipe(Effect.orElseSucceed((): ReadonlyArray<string> => []))
    const records = yield* Effect.forEach(names.filter((n) => n.endsWith(".json") && !n.startsWith(".")), (name) =>
      fs.readFileString(Path.join(dir, "tasks", name)).pipe(
        Effect.map((text) => Either.getOrUndefined(Task.decodeRecordJson(text))),
        Effect.orElseSucceed(() => undefined)
      ))
    return records.flatMap((record): ReadonlyArray<Hosted> =>
      record === undefined ? [] : [{
        record,
        owner,
        ownerLive,
        dir,
        status: !ownerLive && !Task.isTerminal(record.status) ? "interrupted" : record.status
      }]
    )
  })

/** Every task every skein process of the root recorded, newest first. */
const allTasks = (configRoot: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const hosts = yield* fs.readDirectory(hostsDir(configRoot)).pipe(Effect.orElseSucceed((): ReadonlyArray<string> => []))
    const found = yield* Effect.forEach(hosts, (pid) => hostedIn(Path.join(hostsDir(configRoot), pid)))
    return found.flat().sort((a, b) => b.record.createdAt - a.record.createdAt)
  })

const findTask = (configRoot: string, id: string) =>
  Effect.gen(function*() {
    // A task id, or a unique start of one (`list` prints them whole).
    if (!/^[bartwmd][0-9a-z]{0,8}$/.test(id)) {
      return yield* fail(`${JSON.stringify(id)} is not a task id (a type letter b a r t w m d and 8 of [0-9a-z])`)
    }
    const found = Option.getOrUndefined(yield* Lookup.uniquePrefix(id, yield* allTasks(configRoot), (t) => t.record.id, "task ids"))
    if (found === undefined) return yield* fail(`no task ${id} under ${hostsDir(configRoot)}`)
    return found
  })

const asJson = (t: Hosted) => ({ ...t.record, status: t.status, recordedStatus: t.record.status, ownerPid: t.owner.pid, ownerLive: t.ownerLive, cwd: t.owner.cwd })

const ago = (millis: number) => {
  const s = Math.max(0, Math.round((Date.now() - millis) / 1000))
  return s < 90 ? `${s}s ago` : s < 5400 ? `${Math.round(s / 60)}m ago` : `${Math.round(s / 3600)}h ago`
}

const line = (t: Hosted) =>
  `${t.record.id}  ${t.status.padEnd(11)}  ${t.record.type.padEnd(11)}  ${ago(t.record.createdAt).padStart(8)}  pid ${t.owner.pid}${
    t.ownerLive ? "" : " (exited)"
  }  ${t.record.description.replace(/\s+/g, " ").slice(0, 80)}`

const withExample = (description: string, example: string) => HelpDoc.blocks([HelpDoc.p(description), HelpDoc.p(`Example: ${example}`)])

// ---------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------

const json = Options.boolean("json").pipe(Options.withDescription("print JSON"))
const listOptions = {
  root: Lookup.rootOption,
  running: Options.boolean("running").pipe(Options.withDescription("only tasks still pending or running")),
  json
}

const list = Command.make("list", listOptions, (options) =>
  Effect.gen(function*() {
    const root = yield* Lookup.rootOf(options.root)
    const tasks = (yield* allTasks(root)).filter((t) => !options.running || !Task.isTerminal(t.status))
    if (options.json) return yield* Console.log(JSON.stringify(tasks.map(asJson)))
    if (tasks.length === 0) return yield* Console.log("no tasks")
    for (const t of tasks) yield* Console.log(line(t))
  })).pipe(Command.withDescription(withExample(
    "List the background tasks of the sessions skein run and skein chat host, newest first.",
    "skein tasks list --running --json"
  )))

const showOptions = { root: Lookup.rootOption, json }

const show = Command.make("show", { ...showOptions, id: Args.text({ name: "task-id" }) }, (options) =>
  Effect.gen(function*() {
    const found = yield* findTask(yield* Lookup.rootOf(options.root), options.id)
    const fs = yield* FileSystem.FileSystem
    const output = yield* fs.readFileString(found.record.outputFile).pipe(Effect.orElseSucceed(() => ""))
    if (options.json) return yield* Console.log(JSON.stringify({ ...asJson(found), output }))
    yield* Console.log(line(found))
    const r = found.record
    for (
      const [name, value] of [
        ["description", r.description],
        ["tool use", r.toolUseId],
        ["summary", r.summary],
        ["error", r.error],
        ["result", r.result === undefined ? undefined : JSON.stringify(r.result)],
        ["output file", r.outputFile]
      ] as const
    ) {
      if (value !== undefined) yield* Console.log(`${name.padEnd(12)} ${value}`)
    }
    if (output.length > 0) yield* Console.log(output.endsWith("\n") ? output.slice(0, -1) : output)
  })).pipe(Command.withDescription(withExample("Print a task's record and its output.", "skein tasks show b4k2m9x0q")))

const killOptions = { root: Lookup.rootOption }

/** Asks the owner to stop the task and waits until its record says it ended. */
const kill = Command.make("kill", { ...killOptions, id: Args.text({ name: "task-id" }) }, (options) =>
  Effect.gen(function*() {
    const root = yield* Lookup.rootOf(options.root)
    const found = yield* findTask(root, options.id)
    const id = found.record.id
    if (Task.isTerminal(found.status)) return yield* fail(`task ${id} has already ended (${found.status})`)
    const fs = yield* FileSystem.FileSystem
    yield* fs.writeFileString(Path.join(killDir(found.dir), id), "").pipe(
      Effect.mapError((e) => fail(`could not ask pid ${found.owner.pid} to stop ${id}: ${e.message}`))
    )
    const ended = Effect.flatMap(findTask(root, id), (t) => Task.isTerminal(t.status) ? Effect.succeed(t) : Effect.fail(fail("")))
    const done = yield* Effect.retry(ended, Schedule.spaced("200 millis").pipe(Schedule.upTo("15 seconds"))).pipe(
      Progress.withProgress(`stopping ${id}`),
      Effect.mapError(() => fail(`task ${id} did not stop within 15 s (its skein is pid ${found.owner.pid})`))
    )
    yield* Console.log(`${id} ${done.status}`)
  })).pipe(Command.withDescription(withExample(
    "Stop a running task: the skein process hosting its session asks its CLI to stop it.",
    "skein tasks kill b4k2m9x0q"
  )))

export const tasks = Command.make("tasks").pipe(
  Command.withDescription(withExample("Background tasks of skein's sessions: list, show, kill.", "skein tasks list")),
  Command.withSubcommands([list, show, kill])
)

export const tasksSpec: Argv.Spec = Argv.group("tasks", { list: listOptions, show: showOptions, kill: killOptions })

