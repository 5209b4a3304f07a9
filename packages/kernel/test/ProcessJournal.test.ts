import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Logger, Option, Schema, Stream } from "effect"
import * as SpyFs from "@skein/testkit/SpyFs"
import * as TsChild from "@skein/testkit/TsChild"
import * as NodeChildProcess from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import * as ProcessHost from "../src/ProcessHost.js"
import * as ProcessJournal from "../src/ProcessJournal.js"
import { guard, isAlive, isGone, waitGone } from "./procs.js"

const fixture = NodePath.join(import.meta.dirname, "fixtures/journal-owner.ts")
const writerFixture = NodePath.join(import.meta.dirname, "fixtures/journal-writer.ts")
const repoRoot = NodePath.join(import.meta.dirname, "../../..")

const tempDir = Effect.acquireRelease(
  Effect.sync(() => NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), "skein-journal-"))),
  (dir) => Effect.sync(() => NodeFs.rmSync(dir, { recursive: true, force: true }))
)

const readJournal = (file: string): ReadonlyArray<ProcessJournal.Entry> => {
  const raw: { entries: Array<unknown> } = JSON.parse(NodeFs.readFileSync(file, "utf8"))
  return raw.entries.map((entry) => Schema.decodeUnknownSync(ProcessJournal.Entry)(entry))
}

const writeJournal = (file: string, entries: ReadonlyArray<ProcessJournal.Entry>) =>
  NodeFs.writeFileSync(file, JSON.stringify({ version: 1, entries }))

const procIdentity = (pid: number): ProcessJournal.Identity => {
  const stat = NodeFs.readFileSync(`/proc/${pid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return { source: "proc", startTime: fields[19]!, cmdline: NodeFs.readFileSync(`/proc/${pid}/cmdline`, "utf8") }
}

/** A pid that belonged to a process that has exited. */
const deadPid = Effect.promise(() =>
  new Promise<number>((resolve) => {
    const child = NodeChildProcess.spawn("true")
    child.once("exit", () => resolve(child.pid!))
  })
)

/** An unrelated live process in its own group, killed on scope close. */
const bystander = Effect.acquireRelease(
  Effect.sync(() => NodeChildProcess.spawn("sleep", ["1000"], { detached: true, stdio: "ignore" }).pid!),
  (pid) => Effect.sync(() => process.kill(-pid, "SIGKILL"))
)

const captureLogs = (sink: Array<string>) =>
  Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => {
    sink.push(Array.isArray(message) ? message.join(" ") : String(message))
  }))

describe("ProcessJournal", () => {
  it.scopedLive("a runtime killed with SIGKILL leaves a journal, and the next start reaps its orphans", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const journal = NodePath.join(dir, "state", "journal.json")
      let pids: Array<number> = []
      yield* guard(() => pids)
      // If the test fails before the pids are known, the journal still knows them.
      yield* Effect.addFinalizer(() =>
        Effect.flatMap(ProcessJournal.ProcessJournal, (j) => j.reap).pipe(
          Effect.provide(ProcessJournal.layer({ path: journal })),
          Effect.provide(Layer.merge(NodeContext.layer, Logger.remove(Logger.defaultLogger)))
        )
      )

      const owner = yield* ProcessHost.spawn({
        command: process.execPath,
        args: [...TsChild.nodeArgs(fixture), journal],
        cwd: repoRoot,
        label: "journal-owner"
      })
      const line = yield* owner.stdout.pipe(Stream.decodeText(), Stream.splitLines, Stream.runHead)
      const spawned: { leaders: Array<number>; exitedLeader: number; grandchild: number } = JSON.parse(
        Option.getOrThrow(line)
      )
      pids = [...spawned.leaders, spawned.grandchild]
      expect(pids).toHaveLength(3)

      const recorded = readJournal(journal)
      expect(recorded.map((e) => e.pid).sort()).toEqual([...spawned.leaders, spawned.exitedLeader].sort())
      expect(recorded.every((e) => e.owner.pid === owner.pid && e.pgid === e.pid)).toBe(true)
      expect(recorded.map((e) => e.label).sort()).toEqual(["shell", "sleep-1", "sleep-2"])

      yield* owner.kill("SIGKILL")
      expect((yield* owner.await).signal).toBe("SIGKILL")
      // No finalizer ran: the orphans live on, including the group whose leader exited.
      expect(pids.every(isAlive)).toBe(true)
      expect(isGone(spawned.exitedLeader)).toBe(true)

      const logs: Array<string> = []
      const entries = yield* Effect.flatMap(ProcessJournal.ProcessJournal, (j) => j.entries).pipe(
        Effect.provide(ProcessHost.layerJournal({ journal })),
        Effect.provide(Layer.merge(NodeContext.layer, captureLogs(logs)))
      )
      // The reap waits for the groups to die before the layer is ready.
      expect(pids.filter(isAlive)).toEqual([])
      expect(entries).toEqual([])
      expect(readJournal(journal)).toEqual([])
      expect(logs.some((l) => l.includes("reaped 3 orphan group(s)"))).toBe(true)
      expect(logs.filter((l) => l.includes("reaped orphan group"))).toHaveLength(3)
    }).pipe(Effect.provide(ProcessHost.layerMemory({ stopTimeouts: { stdinGrace: "100 millis", termGrace: "200 millis" } }))))

  it.scopedLive("an entry whose pid now runs another program is not killed", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const journal = NodePath.join(dir, "journal.json")
      const victim = yield* bystander
      const real = procIdentity(victim)
      const dead = yield* deadPid
      const gone = yield* deadPid
      const deadOwner = { pid: dead, identity: null }
      const base = { pgid: victim, command: "sleep", spawnedAt: new Date().toISOString() }
      writeJournal(journal, [
        { ...base, pid: victim, identity: { ...real, startTime: "1" }, owner: deadOwner, label: "wrong start" },
        { ...base, pid: victim, identity: { ...real, cmdline: "node\0x.js\0" }, owner: deadOwner, label: "wrong cmd" },
        { ...base, pid: gone, pgid: gone, identity: { ...real, startTime: "2" }, owner: deadOwner, label: "gone" },
        // The owner is this live test process: its children are not orphans.
        { ...base, pid: victim, identity: real, owner: { pid: process.pid, identity: procIdentity(process.pid) } }
      ])

      const report = yield* Effect.flatMap(ProcessJournal.ProcessJournal, (j) => j.reap).pipe(
        Effect.provide(ProcessJournal.layer({ path: journal })),
        Effect.provide(NodeContext.layer)
      )
      expect(report.reaped).toEqual([])
      expect(report.dropped.map((d) => [d.entry.label, d.reason])).toEqual([
        ["wrong start", "pid reused"],
        ["wrong cmd", "pid reused"],
        ["gone", "gone"]
      ])
      expect(report.kept.map((e) => e.owner.pid)).toEqual([process.pid])
      expect(isAlive(victim)).toBe(true)
      expect(readJournal(journal).map((e) => e.owner.pid)).toEqual([process.pid])
    }))

  it.scopedLive("without /proc, identities come from ps and reaping works the same", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const journal = NodePath.join(dir, "journal.json")
      const env = Layer.merge(NodeContext.layer, Logger.remove(Logger.defaultLogger))
      const host = ProcessHost.layer().pipe(
        Layer.provideMerge(ProcessJournal.layer({ path: journal, source: "ps" })),
        Layer.provide(env)
      )
      let pids: Array<number> = []
      yield* guard(() => pids)
      const child = yield* ProcessHost.spawn({ command: "sleep", args: ["1000"] }).pipe(Effect.provide(host))
      pids = [child.pid]
      const [entry] = readJournal(journal)
      expect(entry?.identity.source).toBe("ps")
      expect(entry?.identity.cmdline).toBe("sleep 1000")
      // Pretend the owner died.
      writeJournal(journal, [{ ...entry!, owner: { pid: yield* deadPid, identity: null } }])

      const report = yield* Effect.flatMap(ProcessJournal.ProcessJournal, (j) => j.reap).pipe(
        Effect.provide(ProcessJournal.layer({ path: journal, source: "ps" })),
        Effect.provide(env)
      )
      expect(report.reaped.map((r) => r.entry.pid)).toEqual([child.pid])
      expect(report.reaped[0]?.members).toEqual([child.pid])
      expect(yield* waitGone([child.pid])).toBe(true)
      expect(readJournal(journal)).toEqual([])
    }))

  it.scopedLive("a corrupt journal is read as empty and rewritten on the next change", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const journal = NodePath.join(dir, "journal.json")
      NodeFs.writeFileSync(journal, "{ not json")
      const logs: Array<string> = []
      const layer = ProcessHost.layerJournal({ journal }).pipe(
        Layer.provide(Layer.merge(NodeContext.layer, captureLogs(logs)))
      )
      const entries = yield* Effect.gen(function*() {
        const child = yield* ProcessHost.spawn({ command: "cat" })
        const recorded = readJournal(journal)
        yield* child.closeStdin
        return recorded
      }).pipe(Effect.scoped, Effect.provide(layer))
      expect(entries.map((e) => e.command)).toEqual(["cat"])
      expect(logs.some((l) => l.includes("cannot read"))).toBe(true)
      // Removed at scope close.
      expect(readJournal(journal)).toEqual([])
    }))
  it.scopedLive("failure 10: two runtimes sharing one journal file never lose each other's entries", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const journal = NodePath.join(dir, "journal.json")
      const barrier = NodePath.join(dir, "barrier")
      NodeFs.mkdirSync(barrier)
      const count = 60
      // Made-up pids above any pid_max: nothing real is ever named.
      const firsts = [5_000_000, 6_000_000]
      const run = (first: number) =>
        Effect.scoped(Effect.gen(function*() {
          const child = yield* Command.start(
            Command.make(process.execPath, ...TsChild.nodeArgs(writerFixture), journal, barrier, String(count), String(first))
              .pipe(Command.workingDirectory(repoRoot))
          )
          const [stdout, stderr, code] = yield* Effect.all([
            Stream.mkString(Stream.decodeText(child.stdout)),
            Stream.mkString(Stream.decodeText(child.stderr)),
            child.exitCode
          ], { concurrency: "unbounded" })
          expect(stderr).toBe("")
          expect(code).toBe(0)
          expect(stdout).toBe("done\n")
        }))
      yield* Effect.all(firsts.map(run), { concurrency: 2 })
      // Each kept its odd pids; neither lost one of the other's, nor revived a removed one.
      const expected = firsts.flatMap((first) =>
        Array.from({ length: count }, (_, i) => first + i).filter((pid) => pid % 2 === 1)
      )
      expect(readJournal(journal).map((e) => e.pid).sort()).toEqual(expected.sort())
      // The lock is given back after each change: nothing is left beside the journal.
      expect(NodeFs.readdirSync(dir).sort()).toEqual(["barrier", "journal.json"])
    }).pipe(Effect.provide(NodeContext.layer)), { timeout: 60_000 })

  it.scopedLive("failure 10: a journal change is fsynced before its rename and the folder after it", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const journal = NodePath.join(dir, "journal.json")
      const events: Array<string> = []
      const journalLayer = ProcessJournal.layer({ path: journal }).pipe(
        Layer.provide(Layer.merge(Path.layer, Layer.effect(FileSystem.FileSystem, SpyFs.make(events))))
      )
      yield* Effect.flatMap(ProcessJournal.ProcessJournal, (j) =>
        j.record({
          pid: 5_000_001,
          pgid: 5_000_001,
          identity: { source: "proc", startTime: "1", cmdline: "made-up" },
          command: "made-up"
        })).pipe(Effect.provide(journalLayer))
      const rename = events.findIndex((e) => e.startsWith("rename ") && e.endsWith(` -> ${journal}`))
      expect(rename).toBeGreaterThan(-1)
      const temp = events[rename]!.slice("rename ".length).split(" -> ")[0]!
      expect(events.slice(0, rename)).toContain(`sync ${temp}`)
      expect(events.slice(rename)).toContain(`sync ${dir}`)
      expect(readJournal(journal).map((e) => e.pid)).toEqual([5_000_001])
    }).pipe(Effect.provide(NodeContext.layer)))
})
