/**
 * The cost of a cluster hop (issue 27): prompt to first event, and to the
 * turn's end, on testkit's stand-in CLI (a canned turn per prompt, so the
 * CLI's own time is near nothing and the server's path is what is timed).
 * Three contenders, each a process of its own over one throwaway Postgres:
 *
 * - **local**: serve's in-process registry (`Serve.layer`, the SQL store in
 *   context): the baseline.
 * - **cluster, same runner**: the session's entity on the runner whose edge
 *   took the prompt (the entity's own cost, no network hop).
 * - **cluster, A → B**: the HTTP edge on runner A, the entity (and CLI) on
 *   runner B: the prompt crosses to B, the events come back to A's SSE
 *   through the shared SQL event log.
 *
 * Each contender's session is warmed (its CLI running) before its prompts
 * are timed; prompts alternate between contenders. The SSE client is on the
 * edge the prompt was sent to and follows only its contender's folder (see
 * `place`). Target: A → B at most 5 ms more than local at
 * p50 (first event).
 *
 *   npx tsx bench/hop.ts [prompts=30] [rounds=3]
 */
import { ClaudeCli, Postgres } from "@skein/testkit"
import { Effect, Redacted } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Processes from "../packages/cluster/test/processes.js"
import type { RunnerConfig } from "../packages/cluster/test/runner.js"

const prompts = Number(process.argv[2] ?? 30)
const rounds = Number(process.argv[3] ?? 3)
const token = "bench-token-0123456789"

const call = (url: string) => Processes.api(url, token)

/** How many stand-in CLIs a runner process runs (its children). */
const standIns = (runner: Processes.RunnerProcess) => {
  try {
    return ChildProcess.execFileSync("ps", ["-o", "args=", "--ppid", String(runner.child.pid)], { encoding: "utf8" })
      .split("\n").filter((line) => line.includes("stand-in-cli")).length
  } catch {
    return 0 // ps exits 1 when there are no children
  }
}

const percentile = (xs: ReadonlyArray<number>, p: number) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!
}

interface Contender {
  readonly name: string
  readonly edge: Processes.RunnerProcess
  readonly sessionID: string
  readonly watcher: Processes.Subscriber
}

/** One timed prompt: ms to the session's first event after the POST, and to its `session.idle`. */
const timed = (c: Contender, text: string) =>
  Effect.promise(async () => {
    const before = c.watcher.frames.length
    const mine = (f: Processes.Frame) => f.properties["sessionID"] === c.sessionID && c.watcher.frames.indexOf(f) >= before
    const start = performance.now()
    let first = 0
    const firstSeen = c.watcher.until(mine, 30_000).then(() => (first = performance.now() - start))
    const idle = c.watcher.until((f) => mine(f) && f.type === "session.idle", 30_000)
    await call(c.edge.url)("POST", `/session/${c.sessionID}/prompt_async`, { parts: [{ type: "text", text }] })
    await Promise.all([firstSeen, idle])
    return { first, idle: performance.now() - start }
  })

const program = Effect.gen(function*() {
  const pg = yield* Postgres.start()
  const shared = yield* ClaudeCli.offlineDirs("skein-bench-hop-")
  const cwd = Fs.realpathSync(shared.cwd)
  const configFor = (name: string, database: string, extra: Partial<RunnerConfig>): RunnerConfig => {
    const root = Path.join(shared.root, name)
    for (const d of ["config", "tmp"]) Fs.mkdirSync(Path.join(root, d), { recursive: true })
    return {
      database,
      configDir: Path.join(root, "config"),
      tmpDir: Path.join(root, "tmp"),
      cwd,
      modelUrl: "http://127.0.0.1:9",
      runnerPort: 0,
      token,
      runner: "Socket",
      standIn: true,
      ...extra
    }
  }
  const clusterDb = Redacted.value(yield* pg.database("hop_cluster"))
  const localDb = Redacted.value(yield* pg.database("hop_local"))
  // One after the other: runners that start together race in the migrations of the shared schema.
  const [a, b, local] = yield* Effect.all([
    Processes.spawnRunner(configFor("a", clusterDb, { runnerPort: 34731 })),
    Processes.spawnRunner(configFor("b", clusterDb, { runnerPort: 34732 })),
    Processes.spawnRunner(configFor("local", localDb, { registry: "local" }))
  ])
  // Let the two runners share the shards out before sessions are placed.
  yield* Effect.sleep("5 seconds")

  /**
   * A warmed session reached through `edge`, whose entity is on `host` (any runner when undefined). Each
   * contender has a folder of its own and its watcher follows only that folder: serve paces a client's
   * takes (a 40 ms window after each), so a watcher that also got the previous contender's turn end
   * (A's edge serves two contenders) would hold this turn's first event until that window passed.
   */
  const place = (name: string, folder: string, edge: Processes.RunnerProcess, host: "edge" | "other" | undefined) =>
    Effect.gen(function*() {
      const directory = Path.join(cwd, folder)
      Fs.mkdirSync(directory, { recursive: true })
      for (let attempt = 0; attempt < 40; attempt++) {
        const session = yield* Effect.promise(() => call(edge.url)("POST", `/session?directory=${encodeURIComponent(directory)}`, {}))
        const before = [standIns(a), standIns(b)]
        yield* Effect.promise(() => call(edge.url)("POST", `/session/${session.id}/message`, { parts: [{ type: "text", text: "warm up" }] }))
        const onA = standIns(a) > before[0]!
        const onB = standIns(b) > before[1]!
        const hostIsEdge = (onA && edge === a) || (onB && edge === b)
        if (host !== undefined && !(onA || onB)) continue
        if (host === undefined || (host === "edge") === hostIsEdge) {
          const watcher = Processes.subscribe(edge.url, token, directory)
          yield* Effect.promise(() => watcher.until((f) => f.type === "server.connected", 10_000))
          return { name, edge, sessionID: session.id as string, watcher } satisfies Contender
        }
      }
      return yield* Effect.dieMessage(`no session of ${name} landed where it should`)
    })

  const contenders = [
    yield* place("local (in-process registry)", "local", local, undefined),
    yield* place("cluster, same runner", "same", a, "edge"),
    yield* place("cluster, edge A → entity B", "hop", a, "other")
  ]
  console.log(`load average ${Os.loadavg()[0]!.toFixed(1)} on ${Os.cpus().length} CPUs; ${rounds} rounds of ${prompts} prompts per contender (warm sessions, stand-in CLI)`)
  const results = new Map(contenders.map((c) => [c.name, [] as Array<{ readonly first: ReadonlyArray<number>; readonly idle: ReadonlyArray<number> }>]))
  for (let round = 0; round < rounds; round++) {
    const firsts = new Map(contenders.map((c) => [c.name, [] as Array<number>]))
    const idles = new Map(contenders.map((c) => [c.name, [] as Array<number>]))
    for (let i = 0; i < prompts; i++) {
      for (const c of contenders) {
        const t = yield* timed(c, `round ${round} prompt ${i}`)
        firsts.get(c.name)!.push(t.first)
        idles.get(c.name)!.push(t.idle)
      }
    }
    for (const c of contenders) results.get(c.name)!.push({ first: firsts.get(c.name)!, idle: idles.get(c.name)! })
    const line = contenders.map((c) => `${c.name} p50 ${percentile(firsts.get(c.name)!, 0.5).toFixed(1)} p95 ${percentile(firsts.get(c.name)!, 0.95).toFixed(1)} ms`).join("; ")
    console.log(`round ${round + 1}: first event ${line}`)
  }
  const p50s = (name: string, key: "first" | "idle") => results.get(name)!.map((r) => percentile(r[key], 0.5))
  const med = (xs: ReadonlyArray<number>) => percentile(xs, 0.5)
  console.log(`\n${"".padEnd(30)}${"first p50 (median / best round)".padStart(34)}${"p95".padStart(8)}${"idle p50".padStart(24)}`)
  for (const c of contenders) {
    const all = results.get(c.name)!
    const p95 = med(all.map((r) => percentile(r.first, 0.95)))
    console.log(
      `${c.name.padEnd(30)}${`${med(p50s(c.name, "first")).toFixed(1)} / ${Math.min(...p50s(c.name, "first")).toFixed(1)} ms`.padStart(34)}${p95.toFixed(1).padStart(8)}${`${med(p50s(c.name, "idle")).toFixed(1)} / ${Math.min(...p50s(c.name, "idle")).toFixed(1)} ms`.padStart(24)}`
    )
  }
  const [base, same, hop] = contenders.map((c) => c.name) as [string, string, string]
  for (const [label, key] of [["first event", "first"], ["turn's end", "idle"]] as const) {
    const b0 = med(p50s(base, key))
    const bBest = Math.min(...p50s(base, key))
    for (const name of [same, hop]) {
      const x = med(p50s(name, key))
      const xBest = Math.min(...p50s(name, key))
      console.log(
        `${label}, ${name} vs local: +${(x - b0).toFixed(1)} ms (×${(x / b0).toFixed(2)}) median round, +${(xBest - bBest).toFixed(1)} ms best rounds`
      )
    }
  }
  const diff = med(p50s(hop, "first")) - med(p50s(base, "first"))
  console.log(`target: A → B at most 5 ms more than local at p50 (first event): ${diff <= 5 ? "met" : "NOT met"} (+${diff.toFixed(1)} ms)`)
  for (const c of contenders) c.watcher.close()
})

Effect.runPromise(Effect.scoped(program)).then(() => process.exit(0), (e) => {
  console.error(e)
  process.exit(0)
})
