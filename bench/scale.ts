/**
 * Scale: how many sessions one process hosts. N concurrent sessions (default
 * 1,000) over testkit's stand-in CLI (a dash script of about 1 MB RSS that
 * answers `initialize` and each user message with a canned turn), against the
 * same figures for one session, measured in the same run.
 *
 *   npx tsx bench/scale.ts              # 1,000 sessions, 50 busy, 5 s windows
 *   npx tsx bench/scale.ts 200 20 3     # 200 sessions, 20 busy, 3 s windows
 *   npx tsx bench/scale.ts 1000 50 5 default   # on Effect's default scheduler
 *
 * Sessions run on kernel's SlicedScheduler, as under `Skein.layer` and the
 * `skein` command; the fourth argument `default` runs them on Effect's own.
 *
 * The same figures are then measured, in the same run, for the Agent SDK
 * (`@anthropic-ai/claude-agent-sdk`, installed on demand, see
 * `support/agentSdk.ts`): one long-lived streaming-input `query()` per
 * session, its `pathToClaudeCodeExecutable` the same stand-in written to a
 * file; a session is started once `initializationResult()` resolves, and a
 * turn ends at its `result`. The stand-ins' pids are found by their working
 * folders. `--no-sdk` skips it. The targets: skein at most the SDK's heap per
 * idle session, event-loop p99 with `busy` sessions busy, and host CPU per
 * turn.
 *
 * For each contender (1 session, then N):
 * - **start**: from the first `Session.start` to every session's `initialize`
 *   answered (all started at once, each in its own Scope); then one turn each,
 *   so every session has seen `system/init` and is idle;
 * - **heap / RSS per idle session**: `heapUsed` and this process's RSS after a
 *   full collection, minus the same before the sessions started, divided by
 *   the count; the stand-ins' own RSS is read from /proc/<pid>/status;
 * - **fds per session**: entries of /proc/self/fd, before and after;
 * - **event-loop delay p99**: `monitorEventLoopDelay` (1 ms resolution, so a
 *   figure includes up to 1 ms of the timer's own interval) over a window with
 *   every session idle, then over a window where `busy` of them run turns back
 *   to back (the turns per second are printed);
 *   CPU and GC pauses (PerformanceObserver) are reported for both windows,
 *   since on a shared machine a delay may be the scheduler's, not ours;
 * - **close**: from closing every session's Scope at once to every scope
 *   closed and every stand-in gone.
 *
 * Each session holds three pipes, so N sessions need about 3N descriptors
 * plus what node holds (the bench asks for 4N + 256). Node raises its soft
 * `ulimit -n` to the hard limit at startup, so only the hard limit matters:
 * below that the bench stops and says what it needs (1,000 sessions: 4,256).
 * It also needs N + a few dozen processes under `ulimit -u`.
 */
import { NodeContext } from "@effect/platform-node"
import { ProcessHost, SlicedScheduler } from "@skein/kernel"
import { Session } from "@skein/session"
import { StandInCli } from "@skein/testkit"
import { Duration, Effect, Exit, Fiber, Layer, Logger, Scope } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { monitorEventLoopDelay, PerformanceObserver } from "node:perf_hooks"
import * as V8 from "node:v8"
import * as Vm from "node:vm"
import { isSdkMessage, loadQuery, type QueryFunction, userInput } from "./support/agentSdk.js"
import * as Shipped from "./support/shipped.js"

// skein as it ships, not through tsx's keepNames (see support/shipped.ts): the SDK runs from its own .mjs.
const shippedExit = await Shipped.rerun(import.meta.filename)
if (shippedExit !== undefined) process.exit(shippedExit)

const positional = process.argv.slice(2).filter((arg) => !arg.startsWith("--"))
const withSdk = !process.argv.includes("--no-sdk")
const count = Number(positional[0] ?? 1000)
const busyCount = Math.min(count, Number(positional[1] ?? 50))
const windowMillis = Number(positional[2] ?? 5) * 1000
const scheduler = positional[3] ?? "sliced"
if (scheduler !== "sliced" && scheduler !== "default") throw new Error(`scheduler: sliced or default, not ${scheduler}`)

// --- descriptors --------------------------------------------------------------

const fdsNeeded = count * 4 + 256

const openFileLimits = (): { readonly soft: number; readonly hard: number } => {
  const line = Fs.readFileSync("/proc/self/limits", "utf8").split("\n").find((l) => l.startsWith("Max open files"))
  const [soft, hard] = (line ?? "").split(/\s+/).slice(3, 5).map((v) => v === "unlimited" ? Infinity : Number(v))
  return { soft: soft ?? 0, hard: hard ?? 0 }
}

// Node raises its soft limit to the hard one at startup, so the hard limit is what counts.
const limits = openFileLimits()
if (limits.soft < fdsNeeded) {
  console.error(
    `scale: ${count} sessions need about ${fdsNeeded} open files; ulimit -n is ${limits.soft} (hard ${limits.hard}): raise the hard limit (ulimit -Hn, as root) or run fewer`
  )
  process.exit(1)
}

// --- measuring ------------------------------------------------------------------

V8.setFlagsFromString("--expose-gc")
const collect: unknown = Vm.runInNewContext("gc")
const fullGc = () => {
  if (typeof collect === "function") {
    collect()
    collect()
  }
}

interface Memory {
  readonly heap: number
  readonly rss: number
  readonly fds: number
}

const memory = (): Memory => {
  fullGc()
  const usage = process.memoryUsage()
  return { heap: usage.heapUsed, rss: usage.rss, fds: Fs.readdirSync("/proc/self/fd").length }
}

/** VmRSS of a process, in bytes; 0 once it is gone. */
const rssOf = (pid: number): number => {
  try {
    const line = Fs.readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"))
    return Number(line?.split(/\s+/)[1] ?? 0) * 1024
  } catch {
    return 0
  }
}

interface Window {
  readonly p99: number
  readonly max: number
  /** This process's CPU time over the window (all threads, the GC's included). */
  readonly cpuMs: number
  /** Garbage-collection pauses in the window: their sum and the longest. */
  readonly gcMs: number
  readonly gcMaxMs: number
  /** Time the event-loop thread was runnable but waited for a CPU (/proc/self/schedstat). */
  readonly runQueueMs: number
  /** CPU time of the stand-ins watched in the window. */
  readonly standInCpuMs: number
}

/** Nanoseconds the main thread has waited on a run queue; 0 where schedstat is missing. */
const runQueueWait = (): number => {
  try {
    return Number(Fs.readFileSync("/proc/self/schedstat", "utf8").split(" ")[1] ?? 0)
  } catch {
    return 0
  }
}

/** utime + stime of a process in milliseconds (clock ticks of 10 ms); 0 once it is gone. */
const cpuOf = (pid: number): number => {
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return (Number(fields[11]) + Number(fields[12])) * 10
  } catch {
    return 0
  }
}

/** Event-loop delay, CPU and GC pauses while `during` runs. */
const measureWindow = (during: Effect.Effect<void>, watched: ReadonlyArray<number>) =>
  Effect.gen(function*() {
    const standInCpu = watched.reduce((sum, pid) => sum + cpuOf(pid), 0)
    const waited = runQueueWait()
    const histogram = monitorEventLoopDelay({ resolution: 1 })
    const pauses: Array<number> = []
    const observer = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) pauses.push(entry.duration)
    })
    observer.observe({ entryTypes: ["gc"] })
    const cpu = process.cpuUsage()
    histogram.enable()
    yield* during
    histogram.disable()
    const used = process.cpuUsage(cpu)
    const runQueueMs = (runQueueWait() - waited) / 1e6
    const standInCpuMs = watched.reduce((sum, pid) => sum + cpuOf(pid), 0) - standInCpu
    // GC entries are delivered asynchronously: let the last ones in.
    yield* Effect.sleep(Duration.millis(50))
    observer.disconnect()
    return {
      p99: histogram.percentile(99) / 1e6,
      max: histogram.max / 1e6,
      cpuMs: (used.user + used.system) / 1000,
      gcMs: pauses.reduce((a, b) => a + b, 0),
      gcMaxMs: Math.max(0, ...pauses),
      runQueueMs,
      standInCpuMs
    } satisfies Window
  })

const since = (start: number) => performance.now() - start

// --- one contender ----------------------------------------------------------------

const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-bench-scale-"))
const cli = StandInCli.command()

interface Figures {
  readonly sessions: number
  readonly startMs: number
  readonly heapPerSession: number
  readonly rssPerSession: number
  readonly standInRss: number
  readonly fdsPerSession: number
  readonly idle: Window
  readonly busy: Window
  readonly busySessions: number
  readonly turnsPerSecond: number
  readonly closeMs: number
}

/** One session as a contender hosts it: its CLI's pid (when the host tells it) and one turn. */
interface Hosted {
  readonly pid: number | undefined
  readonly turn: Effect.Effect<void>
}

/** A way to host sessions: starts one in `cwd`, owned by `scope` (closing it ends the session). */
interface Host {
  readonly name: string
  readonly start: (cwd: string, scope: Scope.Scope) => Effect.Effect<Hosted, never, ProcessHost.ProcessHost>
}

const skeinHost: Host = {
  name: "skein",
  start: (cwd, scope) =>
    Session.start({ cwd, executable: cli.command, executableArgs: cli.args }).pipe(
      Effect.tap((session) => session.initialize),
      Effect.map((session): Hosted => ({
        pid: session.pid,
        turn: Effect.orDie(Effect.asVoid(Effect.flatMap(session.send("hello"), (t) => t.result)))
      })),
      Scope.extend(scope),
      Effect.orDie
    )
}

/** The Agent SDK: one long-lived streaming `query()` per session; a turn ends at its `result`. */
const sdkHost = (query: QueryFunction, executable: string): Host => ({
  name: "Agent SDK",
  start: (cwd, scope) =>
    Effect.gen(function*() {
      const input = userInput()
      const q = query({ prompt: input.messages, options: { pathToClaudeCodeExecutable: executable, cwd, stderr: () => {} } })
      yield* Scope.addFinalizer(scope, Effect.sync(() => {
        input.end()
        q.close()
      }))
      yield* Effect.promise(() => q.initializationResult())
      const messages = q[Symbol.asyncIterator]()
      const turn = Effect.promise(async () => {
        input.push("hello")
        while (true) {
          const next = await messages.next()
          if (next.done === true) throw new Error("the SDK's query ended")
          if (isSdkMessage(next.value) && next.value.type === "result") return
        }
      })
      return { pid: undefined, turn } satisfies Hosted
    })
})

/** The pids of processes whose working folder is one of `cwds`, in their order: one pass over /proc. */
const pidsByCwd = (cwds: ReadonlyArray<string>): ReadonlyArray<number | undefined> => {
  const byCwd = new Map<string, number>()
  for (const name of Fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue
    try {
      byCwd.set(Fs.readlinkSync(`/proc/${name}/cwd`), Number(name))
    } catch {
      // gone, or not ours to read
    }
  }
  return cwds.map((cwd) => byCwd.get(cwd))
}

const contender = (host: Host, n: number, busy: number) =>
  Effect.gen(function*() {
    const before = memory()
    const scopes = yield* Effect.forEach(Array.from({ length: n }), () => Scope.make())
    const cwds = scopes.map((_, i) => {
      const cwd = Path.join(root, `${host.name.replace(/\W/g, "")}-${n}-${i}-${++runs}`)
      Fs.mkdirSync(cwd, { recursive: true })
      return Fs.realpathSync(cwd)
    })
    const startedAt = performance.now()
    const sessions = yield* Effect.forEach(scopes, (scope, i) => host.start(cwds[i]!, scope), { concurrency: "unbounded" })
    const startMs = since(startedAt)
    const found = sessions.some((s) => s.pid === undefined) ? pidsByCwd(cwds) : []
    const pids = sessions.map((s, i) => s.pid ?? found[i]).filter((pid): pid is number => pid !== undefined)
    if (pids.length !== n) console.log(`note: ${host.name}: found ${pids.length} of ${n} stand-in pids`)
    yield* Effect.forEach(sessions, (s) => s.turn, { concurrency: "unbounded", discard: true })

    const idleMemory = memory()
    const standInRss = pids.reduce((sum, pid) => sum + rssOf(pid), 0) / n
    const idle = yield* measureWindow(Effect.sleep(Duration.millis(windowMillis)), pids)

    let turns = 0
    const loops = yield* Effect.forEach(
      sessions.slice(0, busy),
      (session) => Effect.fork(Effect.forever(Effect.tap(session.turn, () => Effect.sync(() => turns++)))),
      { concurrency: "unbounded" }
    )
    const busyDelay = yield* measureWindow(Effect.sleep(Duration.millis(windowMillis)), pids.slice(0, busy))
    const turnsPerSecond = turns / (windowMillis / 1000)
    yield* Effect.forEach(loops, Fiber.interrupt, { concurrency: "unbounded", discard: true })

    const closedAt = performance.now()
    yield* Effect.forEach(scopes, (scope) => Scope.close(scope, Exit.void), { concurrency: "unbounded", discard: true })
    yield* Effect.promise(() => untilGone(pids))
    const closeMs = since(closedAt)
    return {
      sessions: n,
      startMs,
      heapPerSession: (idleMemory.heap - before.heap) / n,
      rssPerSession: (idleMemory.rss - before.rss) / n,
      standInRss,
      fdsPerSession: (idleMemory.fds - before.fds) / n,
      idle,
      busy: busyDelay,
      busySessions: busy,
      turnsPerSecond,
      closeMs
    } satisfies Figures
  })

let runs = 0

const untilGone = async (pids: ReadonlyArray<number>): Promise<void> => {
  const deadline = Date.now() + 60_000
  while (pids.some(ProcessHost.isAlive)) {
    if (Date.now() > deadline) throw new Error(`still alive: ${pids.filter(ProcessHost.isAlive).join(" ")}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

// --- report -----------------------------------------------------------------------

const kb = (bytes: number) => `${(bytes / 1024).toFixed(1)} KB`
const ms = (x: number) => `${x.toFixed(1)} ms`
const pct = (x: number) => `${(100 * x).toFixed(0)}%`
const ratio = (a: number, b: number) => b === 0 ? "n/a" : `${(a / b).toFixed(2)}x`

const turnsOf = (f: Figures) => Math.max(1, f.turnsPerSecond * windowMillis / 1000)

const report = (title: string, one: Figures, many: Figures) => {
  console.log(`\n${title}`)
  const rows: ReadonlyArray<readonly [string, string, string, string]> = [
    ["start, to all initialized", ms(one.startMs), ms(many.startMs), ratio(many.startMs, one.startMs)],
    ["  per session", ms(one.startMs), ms(many.startMs / many.sessions), ratio(many.startMs / many.sessions, one.startMs)],
    ["heap per idle session", kb(one.heapPerSession), kb(many.heapPerSession), ratio(many.heapPerSession, one.heapPerSession)],
    ["RSS per idle session (host)", kb(one.rssPerSession), kb(many.rssPerSession), ratio(many.rssPerSession, one.rssPerSession)],
    ["RSS per stand-in CLI", kb(one.standInRss), kb(many.standInRss), ratio(many.standInRss, one.standInRss)],
    ["open fds per session", one.fdsPerSession.toFixed(2), many.fdsPerSession.toFixed(2), ratio(many.fdsPerSession, one.fdsPerSession)],
    ["event-loop delay p99, all idle", ms(one.idle.p99), ms(many.idle.p99), ratio(many.idle.p99, one.idle.p99)],
    ["  max", ms(one.idle.max), ms(many.idle.max), ratio(many.idle.max, one.idle.max)],
    ["  host CPU, share of one core", pct(one.idle.cpuMs / windowMillis), pct(many.idle.cpuMs / windowMillis), ratio(many.idle.cpuMs, one.idle.cpuMs)],
    ["  event loop runnable, waiting for a CPU", pct(one.idle.runQueueMs / windowMillis), pct(many.idle.runQueueMs / windowMillis), ratio(many.idle.runQueueMs, one.idle.runQueueMs)],
    [
      `event-loop delay p99, ${one.busySessions} / ${many.busySessions} busy`,
      ms(one.busy.p99),
      ms(many.busy.p99),
      ratio(many.busy.p99, one.busy.p99)
    ],
    ["  max", ms(one.busy.max), ms(many.busy.max), ratio(many.busy.max, one.busy.max)],
    ["  GC pauses, sum / longest", `${ms(one.busy.gcMs)} / ${ms(one.busy.gcMaxMs)}`, `${ms(many.busy.gcMs)} / ${ms(many.busy.gcMaxMs)}`, ratio(many.busy.gcMaxMs, one.busy.gcMaxMs)],
    ["  turns per second", one.turnsPerSecond.toFixed(0), many.turnsPerSecond.toFixed(0), ratio(many.turnsPerSecond, one.turnsPerSecond)],
    ["  GC pauses per turn", `${(one.busy.gcMs / turnsOf(one)).toFixed(3)} ms`, `${(many.busy.gcMs / turnsOf(many)).toFixed(3)} ms`, ratio(many.busy.gcMs / turnsOf(many), one.busy.gcMs / turnsOf(one))],
    ["  host CPU per turn", `${(one.busy.cpuMs / turnsOf(one)).toFixed(3)} ms`, `${(many.busy.cpuMs / turnsOf(many)).toFixed(3)} ms`, ratio(many.busy.cpuMs / turnsOf(many), one.busy.cpuMs / turnsOf(one))],
    ["  host CPU, share of one core", pct(one.busy.cpuMs / windowMillis), pct(many.busy.cpuMs / windowMillis), ratio(many.busy.cpuMs, one.busy.cpuMs)],
    ["  stand-ins' CPU per turn", ms(one.busy.standInCpuMs / turnsOf(one)), ms(many.busy.standInCpuMs / turnsOf(many)), ratio(many.busy.standInCpuMs / turnsOf(many), one.busy.standInCpuMs / turnsOf(one))],
    ["  event loop runnable, waiting for a CPU", pct(one.busy.runQueueMs / windowMillis), pct(many.busy.runQueueMs / windowMillis), ratio(many.busy.runQueueMs, one.busy.runQueueMs)],
    ["close, to all gone", ms(one.closeMs), ms(many.closeMs), ratio(many.closeMs, one.closeMs)],
    ["  per session", ms(one.closeMs), ms(many.closeMs / many.sessions), ratio(many.closeMs / many.sessions, one.closeMs)]
  ]
  const widths = [0, 1, 2, 3].map((c) => Math.max(...rows.map((r) => r[c]!.length), 14))
  const header = ["", "1 session", `${many.sessions} sessions`, "ratio"]
  console.log(header.map((h, c) => c === 0 ? h.padEnd(widths[0]!) : h.padStart(widths[c]!)).join("  "))
  for (const row of rows) console.log(row.map((v, c) => c === 0 ? v.padEnd(widths[0]!) : v.padStart(widths[c]!)).join("  "))
  const heapOk = many.heapPerSession <= 100 * 1024
  const delayOk = many.busy.p99 <= 10
  console.log(`target heap <= 100 KB per idle session: ${heapOk ? "met" : "not met"} (${kb(many.heapPerSession)})`)
  console.log(`target event-loop delay p99 <= 10 ms (${many.busySessions} busy): ${delayOk ? "met" : "not met"} (${ms(many.busy.p99)})`)
}

/** skein against the SDK at N sessions, on the three figures of the target. */
const compare = (skein: Figures, sdk: Figures) => {
  const cpuPerTurn = (f: Figures) => f.busy.cpuMs / turnsOf(f)
  const rows: ReadonlyArray<readonly [string, number, number, (x: number) => string]> = [
    ["heap per idle session", skein.heapPerSession, sdk.heapPerSession, kb],
    [`event-loop delay p99, ${skein.busySessions} busy`, skein.busy.p99, sdk.busy.p99, ms],
    ["host CPU per turn", cpuPerTurn(skein), cpuPerTurn(sdk), (x) => `${x.toFixed(2)} ms`]
  ]
  const info: ReadonlyArray<readonly [string, string, string, string]> = [
    ["start, to all initialized", ms(skein.startMs), ms(sdk.startMs), ratio(skein.startMs, sdk.startMs)],
    ["RSS per idle session (host)", kb(skein.rssPerSession), kb(sdk.rssPerSession), ratio(skein.rssPerSession, sdk.rssPerSession)],
    ["event-loop delay p99, all idle", ms(skein.idle.p99), ms(sdk.idle.p99), ratio(skein.idle.p99, sdk.idle.p99)],
    ["turns per second, busy", skein.turnsPerSecond.toFixed(0), sdk.turnsPerSecond.toFixed(0), ratio(skein.turnsPerSecond, sdk.turnsPerSecond)],
    ["GC pauses while busy, sum", ms(skein.busy.gcMs), ms(sdk.busy.gcMs), ratio(skein.busy.gcMs, sdk.busy.gcMs)],
    [
      "  per turn",
      `${(skein.busy.gcMs / turnsOf(skein)).toFixed(3)} ms`,
      `${(sdk.busy.gcMs / turnsOf(sdk)).toFixed(3)} ms`,
      ratio(skein.busy.gcMs / turnsOf(skein), sdk.busy.gcMs / turnsOf(sdk))
    ],
    ["close, to all gone", ms(skein.closeMs), ms(sdk.closeMs), ratio(skein.closeMs, sdk.closeMs)]
  ]
  console.log(`\nskein against the Agent SDK, ${skein.sessions} sessions each`)
  const line = (cells: ReadonlyArray<string>) =>
    console.log(cells.map((v, c) => c === 0 ? v.padEnd(34) : v.padStart(14)).join("  "))
  line(["", "skein", "Agent SDK", "skein / SDK", "target"])
  for (const [name, a, b, format] of rows) line([name, format(a), format(b), ratio(a, b), a <= b ? "met" : "not met"])
  for (const row of info) line([...row, ""])
}

const main = Effect.gen(function*() {
  // Loaded before any contender runs, so both measure from a heap that holds the SDK's module.
  const sdk = withSdk
    ? sdkHost((yield* Effect.promise(loadQuery)).query, StandInCli.writeExecutable(Path.join(root, "stand-in-cli")))
    : undefined
  console.log(
    `scale: ${count} sessions over the stand-in CLI (${cli.command}), ${busyCount} busy, ${windowMillis / 1000} s windows, ${scheduler} scheduler; ulimit -n ${openFileLimits().soft}; ${Os.cpus().length} cpus, load ${
      Os.loadavg()[0]!.toFixed(1)
    }`
  )
  // A warm-up session, so the one-session figures do not include loading and JIT.
  yield* contender(skeinHost, 1, 1)
  const one = yield* contender(skeinHost, 1, 1)
  const many = yield* contender(skeinHost, count, busyCount)
  report("skein", one, many)
  if (sdk === undefined) return
  yield* contender(sdk, 1, 1)
  const sdkOne = yield* contender(sdk, 1, 1)
  const sdkMany = yield* contender(sdk, count, busyCount)
  report("Agent SDK", sdkOne, sdkMany)
  compare(many, sdkMany)
}).pipe(
  Effect.provide(Layer.mergeAll(
    ProcessHost.layerMemory().pipe(Layer.provide(NodeContext.layer), Layer.provide(Logger.remove(Logger.defaultLogger))),
    scheduler === "sliced" ? SlicedScheduler.layer() : Layer.empty
  )),
  Effect.ensuring(Effect.sync(() => Fs.rmSync(root, { recursive: true, force: true })))
)

Effect.runPromise(main).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
