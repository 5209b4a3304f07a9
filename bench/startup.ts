/**
 * Startup latency: from the start of a session to the CLI's `system/init`
 * and to its first `result`, three ways over the same CLI binary, the same
 * FakeModel and the same environment, in one run:
 *
 * - **direct**: `node:child_process.spawn`, write the user message, read
 *   stdout to `init` and `result`. The baseline.
 * - **direct+initialize**: the same, but first `initialize` and wait for its
 *   answer: what a round trip to the CLI before the first turn costs.
 * - **direct+init piped**: `initialize` and the user message written at
 *   once, no wait: what the CLI's own handling of `initialize` costs, which
 *   every contender that sends it pays (the SDK always does).
 * - **skein**: `Session.start`, then `send`. For these options `initialize`
 *   carries nothing, so skein writes it only once someone asks for its answer
 *   (no one does here); with hooks, toolkits, prompts or agents it is written
 *   first, and not waited for: **direct+init piped** is that case's floor.
 * - **sdk**: `@anthropic-ai/claude-agent-sdk`'s `query()` with
 *   `pathToClaudeCodeExecutable` (it sends `initialize` too).
 * - **pooled**: `Session.start` with a `SessionPool` that holds a process for
 *   these options, booted and initialized before the clock starts: what is
 *   left is the turn itself. Compared with **skein** (cold) by its own ratio;
 *   beside it, the same session's second turn timed from `send`: the CLI's
 *   own floor for a turn, below which no warm-up can bring a pooled start.
 *   The pool's `replenishDelay` keeps the replacement's boot (a core for a
 *   second) off the measured turn on this 2-core machine.
 *
 *   npx tsx bench/startup.ts            # 20 rounds after a warm-up
 *   npx tsx bench/startup.ts 20         # 20 rounds
 *   npx tsx bench/startup.ts --model-in-process
 *
 * In stream-json mode the CLI prints `system/init` only once it has read the
 * first user message, so every contender sends that message right away and
 * "to init" includes reading it. Rounds alternate the order of the
 * contenders, each run gets fresh config, working and temp directories, and
 * the medians are reported, since the machines are shared and noisy: of the
 * times, and of each round's ratio to direct (pairing cancels drifts in the
 * load). "host CPU" is this process's CPU time from start to the first result.
 * FakeModel serves from a process of its own: it stands in for a remote API,
 * and in this process its Effect code shares the JIT's state with the
 * contender that runs, so its cost is not the same for every contender (it
 * was about 15 ms in the SDK's window and 7 ms in skein's).
 * Each run's process must be gone before the next one starts.
 *
 * The SDK is not a dependency of the repository: the bench installs it on
 * demand (`npm install --prefix <tmp>`) into a cached temp directory.
 */
import { NodeContext } from "@effect/platform-node"
import { ProcessHost } from "@skein/kernel"
import { Session, SessionPool } from "@skein/session"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Layer, ManagedRuntime, Stream } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Readline from "node:readline"
import { isSdkMessage, loadQuery, type QueryFunction } from "./support/agentSdk.js"
import { inheritedEnv, processesIn, type RunDirs, runDirs } from "./support/runDirs.js"
import { modelProcess } from "./support/modelProcess.js"
import * as Shipped from "./support/shipped.js"

// skein as it ships, not through tsx's keepNames (see support/shipped.ts): the SDK runs from its own .mjs.
const shippedExit = await Shipped.rerun(import.meta.filename)
if (shippedExit !== undefined) process.exit(shippedExit)

const rounds = Number(process.argv.slice(2).find((arg) => /^\d+$/.test(arg)) ?? 20)
/** Where FakeModel runs: a process of its own (the default), or this one (`--model-in-process`, how the bench measured before). */
const modelInProcess = process.argv.includes("--model-in-process")
const prompt = "Say hello"

// --- setup -------------------------------------------------------------------

const cli = await Effect.runPromise(Effect.orDie(ClaudeCli.executable))
const cliVersion: unknown = JSON.parse(
  Fs.readFileSync(Path.join(Path.dirname(Path.dirname(cli)), "package.json"), "utf8")
).version

const inherited = inheritedEnv()
const { fresh: freshDirs, root } = runDirs("startup")

const envFor = (baseUrl: string, d: RunDirs): Record<string, string> => ({
  ...inherited,
  ...ClaudeCli.offlineEnv({ baseUrl, configDir: d.configDir, tmpDir: d.tmpDir }),
  // skein always sets it; the others get it too, so the CLI does the same work.
  CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS: "1"
})

/** Waits until no process runs in the run's directory; kills stragglers after 10 s. */
const settle = async (d: RunDirs): Promise<void> => {
  const deadline = Date.now() + 10_000
  while (processesIn(d.cwd).length > 0) {
    if (Date.now() > deadline) {
      for (const pid of processesIn(d.cwd)) process.kill(pid, "SIGKILL")
    }
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

// --- the SDK, installed on demand (bench/support/agentSdk.ts) ---------------

const loadSdk = async (): Promise<QueryFunction> => {
  const { bundledCli, query } = await loadQuery()
  if (bundledCli !== cliVersion) console.log(`note: the SDK was built for CLI ${String(bundledCli)}, the CLI here is ${String(cliVersion)}`)
  return query
}

// --- the contenders ----------------------------------------------------------

/** What skein passes for these options (`Session.start` adds nothing else here). */
const directArgs = ["-p", "--output-format", "stream-json", "--input-format", "stream-json", "--verbose", "--bare"]

interface Timing {
  readonly init: number
  readonly result: number
  readonly cpu: number
  /** Pooled only: a second turn of the same session, from `send` to its result: the CLI's own floor. */
  readonly second?: number | undefined
}

const cpuSince = (start: NodeJS.CpuUsage): number => {
  const used = process.cpuUsage(start)
  return (used.user + used.system) / 1000
}

type Contender = (baseUrl: string) => Promise<Timing>

const userLine = `${JSON.stringify({ type: "user", message: { role: "user", content: prompt } })}\n`
const initializeLine = `${JSON.stringify({ type: "control_request", request_id: "init_1", request: { subtype: "initialize" } })}\n`

/**
 * Spawns the CLI and writes the user message. With `initialize: "await"`, it
 * first sends `initialize` and waits for the answer, which shows what that
 * round trip would cost; with `"pipelined"`, it writes `initialize` and the
 * user message at once, as `Session.start` does, which shows what the CLI's
 * own handling of `initialize` costs, with no host in between.
 */
const spawnDirect = (options: { readonly initialize: "none" | "await" | "pipelined" }): Contender => async (baseUrl) => {
  const d = freshDirs()
  const t0 = performance.now()
  const c0 = process.cpuUsage()
  const child = ChildProcess.spawn(cli, directArgs, {
    cwd: d.cwd,
    env: envFor(baseUrl, d),
    stdio: ["pipe", "pipe", "pipe"]
  })
  child.stdin.write(
    options.initialize === "none" ? userLine : options.initialize === "await" ? initializeLine : initializeLine + userLine
  )
  child.stderr.resume()
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  let init = -1
  let result = -1
  let cpu = -1
  for await (const line of Readline.createInterface({ input: child.stdout })) {
    const message: unknown = JSON.parse(line)
    if (!isSdkMessage(message)) continue
    if (message.type === "control_response" && options.initialize === "await") child.stdin.write(userLine)
    if (init < 0 && message.type === "system" && message.subtype === "init") init = performance.now() - t0
    if (message.type === "result") {
      result = performance.now() - t0
      cpu = cpuSince(c0)
      break
    }
  }
  child.stdin.end()
  await exited
  await settle(d)
  return { init, result, cpu }
}

/** Options for a skein session in `d`, as a host would pass them. */
const skeinOptions = (baseUrl: string, d: RunDirs): Session.SessionOptions => ({
  cwd: d.cwd,
  configDir: d.configDir,
  env: envFor(baseUrl, d),
  envMode: "replace",
  executable: cli,
  bare: true
})

/** Start → send → first result (with `second`, then a second turn); then end the session and wait for its exit. */
const skeinRun = (options: Session.SessionOptions, second = false) =>
  Effect.scoped(Effect.gen(function*() {
    const t0 = performance.now()
    const c0 = process.cpuUsage()
    const session = yield* Session.start(options)
    const turn = yield* session.send(prompt)
    let init = -1
    let result = -1
    let cpu = -1
    yield* turn.events.pipe(
      Stream.takeUntil((e) => e._tag === "Message" && e.message.type === "result"),
      Stream.runForEach((e) =>
        Effect.sync(() => {
          if (e._tag !== "Message") return
          if (init < 0 && e.message.type === "system" && e.message.subtype === "init") init = performance.now() - t0
          if (e.message.type === "result") {
            result = performance.now() - t0
            cpu = cpuSince(c0)
          }
        })
      )
    )
    yield* turn.result
    let floor: number | undefined
    if (second) {
      const t1 = performance.now()
      yield* Effect.flatMap(session.send(prompt), (next) => next.result)
      floor = performance.now() - t1
    }
    yield* session.end
    yield* session.exit
    return { init, result, cpu, second: floor }
  }))

/** One runtime for every skein run, as a host would have: layers are not rebuilt per session. */
const skein = (runtime: ManagedRuntime.ManagedRuntime<ProcessHost.ProcessHost, never>): Contender => (baseUrl) => {
  const d = freshDirs()
  return runtime.runPromise(skeinRun(skeinOptions(baseUrl, d))).then(async (timing) => {
    await settle(d)
    return timing
  })
}

/**
 * Sessions of one profile (one set of directories) through a pool of one.
 * The clock starts once the pool holds a process; after the run, the pool's
 * replacement boots before the next contender runs, so no one pays for it.
 */
const pooled = (
  runtime: ManagedRuntime.ManagedRuntime<ProcessHost.ProcessHost | SessionPool.SessionPool, never>,
  options: Session.SessionOptions
): Contender =>
() => {
  const ready = Effect.flatMap(SessionPool.SessionPool, (pool) =>
    pool.held.changes.pipe(Stream.filter((pids) => pids.length > 0), Stream.runHead))
  return runtime.runPromise(Effect.zipLeft(Effect.zipRight(ready, skeinRun(options, true)), ready))
}

const sdk = (query: QueryFunction): Contender => async (baseUrl) => {
  const d = freshDirs()
  let release = () => {}
  const inputDone = new Promise<void>((resolve) => {
    release = resolve
  })
  async function* input() {
    yield { type: "user", message: { role: "user", content: prompt }, parent_tool_use_id: null }
    await inputDone
  }
  const t0 = performance.now()
  const c0 = process.cpuUsage()
  const q = query({
    prompt: input(),
    options: {
      pathToClaudeCodeExecutable: cli,
      cwd: d.cwd,
      env: envFor(baseUrl, d),
      extraArgs: { bare: null },
      stderr: () => {}
    }
  })
  let init = -1
  let result = -1
  let cpu = -1
  for await (const message of q) {
    if (!isSdkMessage(message)) continue
    if (init < 0 && message.type === "system" && message.subtype === "init") init = performance.now() - t0
    if (message.type === "result") {
      result = performance.now() - t0
      cpu = cpuSince(c0)
      break
    }
  }
  release()
  q.close()
  await settle(d)
  return { init, result, cpu }
}

// --- the run -----------------------------------------------------------------

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

const main = Effect.gen(function*() {
  const model = modelInProcess ? yield* FakeModel.make() : yield* modelProcess
  const query = yield* Effect.promise(loadSdk)
  const runtime = yield* Effect.acquireRelease(
    Effect.sync(() => ManagedRuntime.make(ProcessHost.layerMemory())),
    (runtime) => Effect.promise(() => runtime.dispose())
  )
  const profile = skeinOptions(model.url, freshDirs())
  const pooledRuntime = yield* Effect.acquireRelease(
    Effect.sync(() =>
      ManagedRuntime.make(
        SessionPool.layer({ profiles: [profile], size: 1, replenishDelay: "2 seconds" }).pipe(Layer.provideMerge(ProcessHost.layerMemory()))
      )
    ),
    (runtime) => Effect.promise(() => runtime.dispose())
  )
  const contenders: ReadonlyArray<readonly [string, Contender]> = [
    ["direct", spawnDirect({ initialize: "none" })],
    ["direct+initialize", spawnDirect({ initialize: "await" })],
    ["direct+init piped", spawnDirect({ initialize: "pipelined" })],
    ["skein", skein(runtime)],
    ["sdk", sdk(query)],
    ["pooled", pooled(pooledRuntime, profile)]
  ]
  const timings = new Map<string, Array<Timing>>(contenders.map(([name]) => [name, []]))

  console.log(
    `CLI ${String(cliVersion)} at ${cli}; FakeModel at ${model.url} (${modelInProcess ? "in this process" : "its own process"}); ${rounds} rounds after a warm-up`
  )
  const load = () => Os.loadavg()[0]!.toFixed(1)
  console.log(`load average ${load()} on ${Os.cpus().length} CPUs`)
  for (let round = 0; round <= rounds; round++) {
    // Rotate who goes first, so no contender always runs on a cold or a warm machine.
    const order = contenders.map((_, i) => contenders[(i + round) % contenders.length]!)
    for (const [name, run] of order) {
      const timing = yield* Effect.promise(() => run(model.url))
      if (timing.init < 0 || timing.result < 0) throw new Error(`${name}: no init or no result`)
      if (round > 0) timings.get(name)!.push(timing)
    }
    if (round > 0 && process.stdout.isTTY === true) process.stdout.write(`round ${round}/${rounds}\r`)
  }

  console.log(`load average at the end ${load()}`)

  // Medians of the times, and medians of the per-round ratios to direct (pairing cancels drifts in load).
  const pairedRatio = (a: string, b: string, key: "init" | "result") =>
    median(timings.get(a)!.map((t, i) => t[key] / timings.get(b)![i]![key]))
  const hostCpu = (name: string) => median(timings.get(name)!.map((t) => t.cpu))
  const pairedCpu = (a: string, b: string) => median(timings.get(a)!.map((t, i) => t.cpu / timings.get(b)![i]!.cpu))
  const col = (s: string, n: number) => s.padStart(n)
  const pooledFloor = timings.get("pooled")!.flatMap((t) => t.second === undefined ? [] : [t.second])
  console.log(
    `\n${"".padEnd(18)}${col("to init", 9)}${col("× direct", 10)}${col("to result", 11)}${col("× direct", 10)}${col("host CPU", 10)}`
  )
  for (const [name] of contenders) {
    const ts = timings.get(name)!
    console.log(
      `${name.padEnd(18)}${col(median(ts.map((t) => t.init)).toFixed(0), 9)}${col(pairedRatio(name, "direct", "init").toFixed(3), 10)}` +
        `${col(median(ts.map((t) => t.result)).toFixed(0), 11)}${col(pairedRatio(name, "direct", "result").toFixed(3), 10)}` +
        `${col(median(ts.map((t) => t.cpu)).toFixed(1), 10)}`
    )
  }
  console.log("(ms, medians; × = median of the per-round ratios)")
  console.log(
    `\nskein vs direct: ${pairedRatio("skein", "direct", "init").toFixed(3)}× to init, ` +
      `${pairedRatio("skein", "direct", "result").toFixed(3)}× to result (target ≤ 1.02)` +
      `\nskein vs sdk:    ${pairedRatio("skein", "sdk", "init").toFixed(3)}× to init, ` +
      `${pairedRatio("skein", "sdk", "result").toFixed(3)}× to result (target ≤ 1)` +
      `\nskein vs direct+initialize: ${pairedRatio("skein", "direct+initialize", "result").toFixed(3)}× to result (a round trip before the first turn, which skein never waits for)` +
      `\nskein vs direct+init piped: ${pairedRatio("skein", "direct+init piped", "result").toFixed(3)}× to result, ` +
      `host CPU ${pairedCpu("skein", "direct+init piped").toFixed(3)}× (what sending initialize would cost the CLI and the host)` +
      `\npooled vs skein: ${pairedRatio("pooled", "skein", "result").toFixed(3)}× to result (target ≤ 0.15); ` +
      `the CLI's own floor, a second turn of the pooled session from send: ${median(pooledFloor).toFixed(0)} ms, ` +
      `${median(timings.get("pooled")!.map((t, i) => (t.second ?? NaN) / timings.get("skein")![i]!.result)).toFixed(3)}× skein's cold result` +
      `\nhost CPU to result: skein ${hostCpu("skein").toFixed(1)} ms, sdk ${hostCpu("sdk").toFixed(1)} ms, ` +
      `skein/sdk ${pairedCpu("skein", "sdk").toFixed(3)}× (median of per-round ratios; target ≤ 1.5)`
  )
  const best = (name: string, key: "result" | "cpu") => Math.min(...timings.get(name)!.map((t) => t[key]))
  console.log(
    `best of the rounds: skein ${best("skein", "result").toFixed(0)} ms to result, ${best("skein", "cpu").toFixed(1)} ms host CPU; ` +
      `sdk ${best("sdk", "result").toFixed(0)} ms, ${best("sdk", "cpu").toFixed(1)} ms`
  )
  const met = (ok: boolean) => ok ? "met" : "NOT met"
  console.log(
    `targets: host CPU to the first result ≤ 1.5× the SDK's: ${met(pairedCpu("skein", "sdk") <= 1.5)}; ` +
      `wall time to the first result ≤ the SDK's: ${met(pairedRatio("skein", "sdk", "result") <= 1)}`
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
