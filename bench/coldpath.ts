/**
 * The cold path of one session, phase by phase: Effect operations, host CPU
 * and wall time for `Session.start`, `send`, each CLI message delivered to
 * the turn's stream, and the scope's close (to the process gone), on the real
 * CLI (FakeModel in a process of its own) and on testkit's stand-in CLI.
 *
 *   npx tsx --conditions=@skein/source bench/coldpath.ts        # 15 rounds after a warm-up
 *   npx tsx --conditions=@skein/source bench/coldpath.ts 30
 *   npx tsx --conditions=@skein/source bench/coldpath.ts 30 --no-ops --only=stand-in
 *
 * Operations are counted by wrapping the fiber runtime's op handlers
 * (`support/opCounter.ts`), for every fiber of the process: a phase's count
 * includes what the session's own fibers (the reader, the turns) ran in it.
 * "per message" is the operations from `send`'s return to the turn's
 * `result`, over the messages the turn's stream delivered in that time (the
 * consumer's `runForEach` included, as a host's would be).
 * The counter itself costs a call per operation: CPU figures here are higher
 * than `bench/startup`'s; compare them before and after, not across benches.
 */
import { ProcessHost } from "@skein/kernel"
import { Session } from "@skein/session"
import { ClaudeCli, StandInCli } from "@skein/testkit"
import { Effect, Exit, ManagedRuntime, Scope, Stream } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as OpCounter from "./support/opCounter.js"
import { modelProcess } from "./support/modelProcess.js"
import { inheritedEnv, processesIn, type RunDirs, runDirs } from "./support/runDirs.js"

/** `--no-ops`: no counter (its wrapper costs a call per operation), for CPU figures and profiles. */
const counting = !process.argv.includes("--no-ops")
const ops: OpCounter.OpCounter = counting ? OpCounter.install() : { total: () => 0, byOp: () => ({}) }
/** `--only=real` or `--only=stand-in`: one contender. */
const only = process.argv.find((arg) => arg.startsWith("--only="))?.slice("--only=".length)
const rounds = Number(process.argv.slice(2).find((arg) => /^\d+$/.test(arg)) ?? 15)
const { fresh: freshDirs, root } = runDirs("coldpath")
process.on("exit", () => Fs.rmSync(root, { recursive: true, force: true }))

const phases = ["start", "send", "per message", "close"] as const
type Phase = typeof phases[number]
interface Sample {
  readonly ops: number
  readonly cpu: number
  readonly wall: number
}
type Run = Record<Phase, Sample> & { readonly messages: number; readonly byOp: ReadonlyArray<readonly [string, number]> }

const cpuNow = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}

/** Marks the start of a phase; `end` returns what it cost. */
const mark = () => {
  const o = ops.total()
  const c = cpuNow()
  const w = performance.now()
  return { end: (per = 1): Sample => ({ ops: (ops.total() - o) / per, cpu: (cpuNow() - c) / per, wall: (performance.now() - w) / per }) }
}

const oneSession = (options: Session.SessionOptions) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const byOp0 = ops.byOp()
    const m0 = mark()
    const session = yield* Session.start(options).pipe(Scope.extend(scope))
    const start = m0.end()
    const m1 = mark()
    const turn = yield* session.send("Say hello")
    const send = m1.end()
    const m2 = mark()
    let messages = 0
    yield* turn.events.pipe(
      Stream.takeUntil((e) => e._tag === "Message" && e.message.type === "result"),
      Stream.runForEach(() => Effect.sync(() => void messages++))
    )
    yield* turn.result
    const perMessage = m2.end(messages)
    const m3 = mark()
    yield* Scope.close(scope, Exit.void)
    const close = m3.end()
    const byOp = OpCounter.diff(byOp0, ops.byOp())
    return { start, send, "per message": perMessage, close, messages, byOp } satisfies Run
  })

/** Waits until no process runs in the run's directory. */
const settle = (d: RunDirs) =>
  Effect.promise(async () => {
    while (processesIn(d.cwd).length > 0) await new Promise((resolve) => setTimeout(resolve, 10))
  })

const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(s.length / 2)
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2
}

const report = (name: string, runs: ReadonlyArray<Run>) => {
  console.log(`\n${name}: ${runs.length} rounds, ${median(runs.map((r) => r.messages))} messages per turn (median)`)
  console.log(`${"".padEnd(13)}${"ops".padStart(8)}${"best".padStart(8)}${"CPU ms".padStart(9)}${"best".padStart(8)}${"wall ms".padStart(9)}${"best".padStart(8)}`)
  for (const phase of phases) {
    const xs = runs.map((r) => r[phase])
    const f = (k: keyof Sample, digits: number) =>
      `${median(xs.map((x) => x[k])).toFixed(digits).padStart(k === "ops" ? 8 : 9)}${Math.min(...xs.map((x) => x[k])).toFixed(digits).padStart(8)}`
    console.log(`${phase.padEnd(13)}${f("ops", 0)}${f("cpu", 2)}${f("wall", 1)}`)
  }
  const last = runs[runs.length - 1]!
  console.log(`ops by code, last round, whole session: ${last.byOp.map(([op, n]) => `${op} ${n}`).join(", ")}`)
}

const main = Effect.gen(function*() {
  const model = only === "stand-in" ? { url: "" } : yield* modelProcess
  const cli = yield* Effect.orDie(ClaudeCli.executable)
  const standIn = StandInCli.command()
  const inherited = inheritedEnv()
  const real = (): readonly [RunDirs, Session.SessionOptions] => {
    const d = freshDirs()
    return [d, {
      cwd: d.cwd,
      configDir: d.configDir,
      env: { ...inherited, ...ClaudeCli.offlineEnv({ baseUrl: model.url, configDir: d.configDir, tmpDir: d.tmpDir }) },
      envMode: "replace",
      executable: cli,
      bare: true
    }]
  }
  const stand = (): readonly [RunDirs, Session.SessionOptions] => {
    const d = freshDirs()
    return [d, { cwd: d.cwd, executable: standIn.command, executableArgs: standIn.args }]
  }
  const runtime = ManagedRuntime.make(ProcessHost.layerMemory())
  yield* Effect.addFinalizer(() => Effect.promise(() => runtime.dispose()))
  const contenders = ([["real CLI", real], ["stand-in CLI", stand]] as const).filter(([name]) => only === undefined || name.startsWith(only))
  const runs = new Map<string, Array<Run>>(contenders.map(([name]) => [name, []]))
  console.log(`load average ${Os.loadavg()[0]!.toFixed(1)} on ${Os.cpus().length} CPUs; ${rounds} rounds after a warm-up`)
  for (let round = 0; round <= rounds; round++) {
    for (const [name, make] of contenders) {
      const [d, options] = make()
      const run = yield* Effect.promise(() => runtime.runPromise(oneSession(options)))
      yield* settle(d)
      if (round > 0) runs.get(name)!.push(run)
    }
  }
  console.log(`load average at the end ${Os.loadavg()[0]!.toFixed(1)}`)
  for (const [name] of contenders) report(name, runs.get(name)!)
})

Effect.runPromise(Effect.scoped(main)).catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
