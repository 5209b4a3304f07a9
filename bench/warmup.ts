/**
 * A pool warmed without a model request: how long a pooled session takes
 * from `Session.start` to the CLI's first model request and to its first
 * `result`, against a cold start, with and without a warm-up, in one run.
 *
 * - **cold**: `Session.start` with no pool, then `send`.
 * - **pooled**: a `SessionPool` of one for these options, its process
 *   booted and initialized before the clock starts.
 * - **pooled+<request>**: the same, with `SessionPool`'s `warmup` set to that
 *   one control request: the pool sends it after `initialize` and holds the
 *   process once it is answered.
 * - **+claim**: the pool's `claim` option: the spare is parked with
 *   `--await-claim` and claimed (`claim_session`, the session's cwd) when
 *   `Session.start` takes it; the clock includes the claim's round trip.
 *   **+claim+context**: the same, with `get_context_usage` sent while parked.
 *   **claim elsewhere**: `+claim+context`, for a session in a folder no
 *   profile names (a fresh one each run): without `claim` that session
 *   starts cold; with it, the claim moves the spare there.
 * - **floor**: the second turn of a pooled session, from `send`: what the
 *   CLI itself spends on a turn once its code has run once. No warm-up of a
 *   first turn can go below it.
 *
 * The model runs in its own process (`support/timedModelServer.ts`) and
 * prints when each request arrives, so "to request" is the CLI's own work
 * between the first user message and its first model request, plus the
 * host's.
 *
 * After each pooled run the bench waits until the pool holds a process
 * again (its replacement booted, initialized and warmed) and then 1.5 s
 * more, so that no run pays for another's boot. Rounds rotate the order; the
 * figures are medians, and each ratio is the median of the per-round ratios
 * (pairing cancels drifts in the load of this shared machine).
 *
 *   npx tsx bench/warmup.ts          # 8 rounds after a warm-up round
 *   npx tsx bench/warmup.ts 12
 *   npx tsx bench/warmup.ts 8 --claim   # only cold, pooled, +context full and the +claim rows
 */
import { NodeContext } from "@effect/platform-node"
import { ProcessHost } from "@skein/kernel"
import type { Control } from "@skein/protocol"
import { Session, SessionPool } from "@skein/session"
import { ClaudeCli } from "@skein/testkit"
import { Duration, Effect, Layer, ManagedRuntime, Stream } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Readline from "node:readline"
import { inheritedEnv, type RunDirs, runDirs } from "./support/runDirs.js"

const rounds = Number(process.argv.slice(2).find((arg) => /^\d+$/.test(arg)) ?? 8)
const claimRowsOnly = process.argv.includes("--claim")
const now = () => performance.timeOrigin + performance.now()

const cli = await Effect.runPromise(Effect.orDie(ClaudeCli.executable))
const { fresh: freshDirs, root } = runDirs("warmup")
const inherited = inheritedEnv()

// --- the model, timing its requests -----------------------------------------------

interface Model {
  readonly url: string
  /** Arrival times (epoch ms) of the conversation requests so far. */
  readonly arrivals: Array<number>
  readonly child: ChildProcess.ChildProcess
}

const modelProcess = Effect.acquireRelease(
  Effect.async<Model>((resume) => {
    const tsx = Path.resolve(import.meta.dirname, "../node_modules/.bin/tsx")
    const child = ChildProcess.spawn(tsx, [Path.resolve(import.meta.dirname, "support/timedModelServer.ts")], {
      stdio: ["pipe", "pipe", "inherit"]
    })
    const arrivals: Array<number> = []
    const lines = Readline.createInterface({ input: child.stdout })
    lines.once("line", (url) => {
      lines.on("line", (line) => {
        const [tag, at, kind] = line.split(" ")
        if (tag === "request" && kind === "conversation") arrivals.push(Number(at))
      })
      resume(Effect.succeed({ url, arrivals, child }))
    })
    child.once("exit", (code) => resume(Effect.dieMessage(`the model's process exited (${code}) before it listened`)))
  }),
  ({ child }) =>
    Effect.async<void>((resume) => {
      if (child.exitCode !== null) return resume(Effect.void)
      child.once("exit", () => resume(Effect.void))
      child.stdin?.end()
    })
)

/** The first conversation request after `t0`; waits a little for its line to come in. */
const arrivalAfter = (model: Model, t0: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 100; i++) {
      const found = model.arrivals.find((t) => t >= t0)
      if (found !== undefined) return found
      yield* Effect.sleep(Duration.millis(10))
    }
    return Number.NaN
  })

// --- runs -----------------------------------------------------------------------------

const options = (baseUrl: string, d: RunDirs): Session.SessionOptions => ({
  cwd: d.cwd,
  configDir: d.configDir,
  env: { ...inherited, ...ClaudeCli.offlineEnv({ baseUrl, configDir: d.configDir, tmpDir: d.tmpDir }) },
  envMode: "replace",
  executable: cli,
  bare: true
})

interface Timing {
  /** From start (or send, for the floor) to the model seeing the request. */
  readonly request: number
  readonly result: number
  /** The same session's second turn, from its send. */
  readonly secondRequest: number
  readonly secondResult: number
}

const turn = (session: Session.Session, model: Model, text: string) =>
  Effect.gen(function*() {
    const t0 = now()
    const sent = yield* session.send(text)
    yield* sent.result
    const result = now() - t0
    return { request: (yield* arrivalAfter(model, t0)) - t0, result }
  })

/** Start → first result, then a second turn; then end the session and wait for its exit. */
const run = (model: Model, opts: Session.SessionOptions) =>
  Effect.scoped(Effect.gen(function*() {
    const t0 = now()
    const session = yield* Session.start(opts)
    const sent = yield* session.send("Say hello")
    yield* sent.result
    const result = now() - t0
    const request = (yield* arrivalAfter(model, t0)) - t0
    const second = yield* turn(session, model, "Say hello again")
    yield* session.end
    yield* session.exit
    return { request, result, secondRequest: second.request, secondResult: second.result } satisfies Timing
  }))

type PoolRuntime = ManagedRuntime.ManagedRuntime<ProcessHost.ProcessHost | SessionPool.SessionPool, never>

const held = Effect.flatMap(SessionPool.SessionPool, (pool) =>
  pool.held.changes.pipe(Stream.filter((pids) => pids.length > 0), Stream.runHead))

const settle = Effect.sleep(Duration.millis(1500))

interface Contender {
  readonly name: string
  readonly run: Effect.Effect<Timing>
}

const cold = (model: Model, runtime: ManagedRuntime.ManagedRuntime<ProcessHost.ProcessHost, never>): Contender => ({
  name: "cold",
  run: Effect.promise(() => runtime.runPromise(run(model, options(model.url, freshDirs()))))
})

const pooled = (
  model: Model,
  name: string,
  { claim, elsewhere, warmup }: Candidate
): Effect.Effect<Contender, never, import("effect").Scope.Scope> =>
  Effect.gen(function*() {
    const profile = options(model.url, freshDirs())
    const runtime: PoolRuntime = yield* Effect.acquireRelease(
      Effect.sync(() =>
        ManagedRuntime.make(
          SessionPool.layer({ profiles: [profile], size: 1, replenishDelay: "1 second", warmup, claim }).pipe(
            Layer.provideMerge(ProcessHost.layerMemory())
          )
        )
      ),
      (runtime) => Effect.promise(() => runtime.dispose())
    )
    const runOnce = Effect.zipRight(
      Effect.zipRight(held, settle),
      Effect.suspend(() => run(model, elsewhere === true ? { ...profile, cwd: freshDirs().cwd } : profile))
    )
    return {
      name,
      // After the run: the replacement is held (booted, initialized, warmed) before anyone else runs.
      run: Effect.promise(() => runtime.runPromise(Effect.zipLeft(runOnce, held)))
    }
  })

interface Candidate {
  readonly warmup: ReadonlyArray<Control.HostRequestPayload>
  readonly claim?: boolean
  /** The session runs in another folder than the profile's. */
  readonly elsewhere?: boolean
}

const allCandidates: ReadonlyArray<readonly [string, Candidate]> = [
  ["pooled", { warmup: [] }],
  ["+context summary", { warmup: [{ subtype: "get_context_usage", detail: "summary" }] }],
  ["+context full", { warmup: [{ subtype: "get_context_usage" }] }],
  ["+mcp_status", { warmup: [{ subtype: "mcp_status" }] }],
  ["+get_status", { warmup: [{ subtype: "get_status" }] }],
  ["+skills dialog", { warmup: [{ subtype: "get_skills_dialog" }] }],
  ["+claim", { warmup: [], claim: true }],
  ["+claim+context", { warmup: [{ subtype: "get_context_usage" }], claim: true }],
  ["claim elsewhere", { warmup: [{ subtype: "get_context_usage" }], claim: true, elsewhere: true }]
]

const candidates = claimRowsOnly
  ? allCandidates.filter(([name]) => ["pooled", "+context full", "+claim", "+claim+context", "claim elsewhere"].includes(name))
  : allCandidates

// --- the run -----------------------------------------------------------------------

const median = (values: ReadonlyArray<number>): number => {
  const sorted = values.filter((v) => !Number.isNaN(v)).sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length === 0 ? Number.NaN : sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

const main = Effect.gen(function*() {
  const model = yield* modelProcess
  const coldRuntime = yield* Effect.acquireRelease(
    Effect.sync(() => ManagedRuntime.make(ProcessHost.layerMemory())),
    (runtime) => Effect.promise(() => runtime.dispose())
  )
  const contenders: Array<Contender> = [cold(model, coldRuntime)]
  for (const [name, candidate] of candidates) contenders.push(yield* pooled(model, name, candidate))
  const timings = new Map<string, Array<Timing>>(contenders.map((c) => [c.name, []]))
  const load = () => Os.loadavg()[0]!.toFixed(1)
  console.log(`warmup: CLI at ${cli}; ${rounds} rounds after a warm-up round; load ${load()} on ${Os.cpus().length} CPUs`)
  for (let round = 0; round <= rounds; round++) {
    const order = contenders.map((_, i) => contenders[(i + round) % contenders.length]!)
    for (const contender of order) {
      const timing = yield* contender.run
      if (round > 0) timings.get(contender.name)!.push(timing)
    }
    if (process.stdout.isTTY === true) process.stdout.write(`round ${round}/${rounds}\r`)
  }
  console.log(`load at the end ${load()}`)

  const of = (name: string) => timings.get(name)!
  const paired = (a: string, b: string, key: keyof Timing, bKey: keyof Timing = key) =>
    median(of(a).map((t, i) => t[key] / of(b)[i]![bKey]))
  const col = (s: string, n: number) => s.padStart(n)
  console.log(
    `\n${"".padEnd(18)}${col("to request", 11)}${col("to result", 11)}${col("× cold", 8)}${col("best", 7)}` +
      `${col("2nd turn: to request", 22)}${col("to result", 11)}`
  )
  for (const { name } of contenders) {
    const ts = of(name)
    console.log(
      `${name.padEnd(18)}${col(median(ts.map((t) => t.request)).toFixed(0), 11)}${col(median(ts.map((t) => t.result)).toFixed(0), 11)}` +
        `${col(paired(name, "cold", "result").toFixed(3), 8)}${col(Math.min(...ts.map((t) => t.result)).toFixed(0), 7)}` +
        `${col(median(ts.map((t) => t.secondRequest)).toFixed(0), 22)}${col(median(ts.map((t) => t.secondResult)).toFixed(0), 11)}`
    )
  }
  console.log("(ms, medians of the rounds; × cold = median of the per-round ratios of time to the first result)")

  const pooledNames = candidates.map(([name]) => name)
  const best = pooledNames.reduce((a, b) => paired(b, "cold", "result") < paired(a, "cold", "result") ? b : a)
  const floorRequest = median(pooledNames.flatMap((name) => of(name).map((t) => t.secondRequest)))
  const floorResult = median(pooledNames.flatMap((name) => of(name).map((t) => t.secondResult)))
  const floorRatio = median(pooledNames.flatMap((name) => of(name).map((t, i) => t.secondResult / of("cold")[i]!.result)))
  console.log(
    `\npooled (no warm-up) vs cold: ${paired("pooled", "cold", "result").toFixed(3)}× to the first result` +
      `\nbest warm-up, ${best}: ${paired(best, "cold", "result").toFixed(3)}× cold, ${paired(best, "pooled", "result").toFixed(3)}× pooled; ` +
      `to the request ${paired(best, "pooled", "request").toFixed(3)}× pooled` +
      `\nSessionPool.warmup (${SessionPool.warmup.map((r) => r.subtype).join(", ")}): ` +
      `${paired("+context full", "cold", "result").toFixed(3)}× cold, ${paired("+context full", "pooled", "result").toFixed(3)}× pooled` +
      `\nSessionPool claim (parked with --await-claim, claim_session when taken): ` +
      `${paired("+claim", "cold", "result").toFixed(3)}× cold, ${paired("+claim", "pooled", "result").toFixed(3)}× pooled, ` +
      `${paired("+claim", "+context full", "result").toFixed(3)}× the warm-up; with the warm-up while parked ` +
      `${paired("+claim+context", "cold", "result").toFixed(3)}× cold, ${paired("+claim+context", "+context full", "result").toFixed(3)}× the warm-up` +
      `\na session in a folder no profile names: cold without claim (1.000×), ${paired("claim elsewhere", "cold", "result").toFixed(3)}× cold with it` +
      `\nthe CLI's own floor (a second turn, from send): ${floorRequest.toFixed(0)} ms to the request, ${floorResult.toFixed(0)} ms to the result, ` +
      `${floorRatio.toFixed(3)}× cold` +
      `\ntarget pooled start to the first result <= 0.15x cold: ${paired(best, "cold", "result") <= 0.15 ? "met" : "not met"} ` +
      `(best ${paired(best, "cold", "result").toFixed(3)}×; the floor is ${floorRatio.toFixed(3)}×)`
  )
})

main.pipe(
  Effect.scoped,
  Effect.ensuring(Effect.sync(() => Fs.rmSync(root, { recursive: true, force: true }))),
  Effect.provide(NodeContext.layer),
  Effect.runPromise
).catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
