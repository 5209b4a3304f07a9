/**
 * SIGKILL the host process of a session: its finalizers never run, so the CLI
 * and the Bash command the CLI started in a session of its own (setsid) live
 * on. The next start of a ProcessHost over the same journal reaps them all.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { ProcessHost, ProcessJournal } from "@skein/kernel"
import { Duration, Effect, Layer, Logger, Option, Stream } from "effect"
import * as TsChild from "@skein/testkit/TsChild"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

const fixture = Path.join(import.meta.dirname, "fixtures/hostKill.ts")
const repoRoot = Path.join(import.meta.dirname, "../../..")

const stat = (pid: number): Option.Option<ReadonlyArray<string>> => {
  try {
    const text = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return Option.some(text.slice(text.lastIndexOf(")") + 2).split(" "))
  } catch {
    return Option.none()
  }
}

/** Running: a /proc entry that is not a zombie (this sandbox's init does not reap orphans). */
const isAlive = (pid: number): boolean => Option.exists(stat(pid), (fields) => fields[0] !== "Z")

/** Live processes whose environment lists `marker` in SKEIN_PROCESS, with their command lines. */
const marked = (marker: string): ReadonlyArray<{ readonly pid: number; readonly cmdline: string }> =>
  Fs.readdirSync("/proc").flatMap((name) => {
    if (!/^\d+$/.test(name) || !isAlive(Number(name))) return []
    try {
      const environ = Fs.readFileSync(`/proc/${name}/environ`, "latin1").split("\0")
      const value = environ.find((entry) => entry.startsWith("SKEIN_PROCESS="))
      if (value === undefined || !value.slice("SKEIN_PROCESS=".length).split(",").includes(marker)) return []
      return [{ pid: Number(name), cmdline: Fs.readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").join(" ").trim() }]
    } catch {
      return []
    }
  })

const poll = <A>(what: string, f: () => Option.Option<A>, maxMillis = 30_000) =>
  Effect.promise(async () => {
    const deadline = Date.now() + maxMillis
    while (Date.now() < deadline) {
      const found = f()
      if (Option.isSome(found)) return found
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    return f()
  }).pipe(Effect.flatMap(Option.match({
    onNone: () => Effect.dieMessage(`timed out waiting for ${what}`),
    onSome: Effect.succeed
  })))

describe("SIGKILL of a session's host", () => {
  it.scopedLive("leaves the CLI and its setsid'd Bash command running, and the next start reaps both", () =>
    Effect.gen(function*() {
      const root = yield* Effect.acquireRelease(
        Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-hostkill-"))),
        (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
      )
      const journal = Path.join(root, "journal.json")
      const host = yield* ProcessHost.spawn({
        command: process.execPath,
        args: [...TsChild.nodeArgs(fixture), root, journal],
        cwd: repoRoot,
        label: "session host"
      })
      const line = yield* host.stdout.pipe(
        Stream.decodeText(),
        Stream.splitLines,
        Stream.runHead,
        Effect.timeoutFail({ duration: Duration.seconds(90), onTimeout: () => new Error("the host printed nothing") })
      )
      const { cliPid, marker }: { cliPid: number; marker: string } = JSON.parse(Option.getOrThrow(line))
      expect(typeof marker).toBe("string")
      const sleeper = yield* poll("the background sleep", () =>
        Option.fromNullable(marked(marker).find((p) => p.cmdline.startsWith("sleep 1000"))))
      // The CLI started it in a session of its own: the CLI's group does not hold it.
      const cliGroup = Option.getOrThrow(stat(cliPid))[2]
      expect(Option.getOrThrow(stat(sleeper.pid))[2]).not.toBe(cliGroup)

      yield* host.kill("SIGKILL")
      expect((yield* host.await).signal).toBe("SIGKILL")
      // No finalizer ran: both live on.
      expect(isAlive(cliPid)).toBe(true)
      expect(isAlive(sleeper.pid)).toBe(true)

      // The next start of a ProcessHost over the same journal.
      const entries = yield* Effect.flatMap(ProcessJournal.ProcessJournal, (j) => j.entries).pipe(
        Effect.provide(ProcessHost.layerJournal({ journal })),
        Effect.provide(Layer.merge(NodeContext.layer, Logger.remove(Logger.defaultLogger)))
      )
      expect(entries).toEqual([])
      yield* poll("the reaped processes to die", () =>
        !isAlive(cliPid) && !isAlive(sleeper.pid) ? Option.some(true) : Option.none(), 5_000)
      expect(marked(marker)).toEqual([])
    }).pipe(Effect.provide(ProcessHost.layerMemory({ stopTimeouts: { stdinGrace: "100 millis", termGrace: "200 millis" } }))),
    120_000)
})
