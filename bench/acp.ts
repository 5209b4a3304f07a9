/**
 * ACP agents, side by side: `session/new` to its answer, `session/prompt`
 * to the first `agent_message_chunk`, and the two together (`session/new`
 * sent to the first chunk: skein answers `session/new` before a cold CLI has
 * booted, so its boot shows in the first chunk instead), through the ACP SDK's client over each
 * agent's stdio, in one run:
 *
 * - **claude-agent-acp** (npm `@agentclientprotocol/claude-agent-acp`
 *   0.101.0, on the Agent SDK): the anchor. It bundles a CLI of its own;
 *   `CLAUDE_CODE_EXECUTABLE` points it at the pinned CLI, so both run the
 *   same binary.
 * - **skein cold**: `skein acp --pool 0`: every `session/new` starts a CLI.
 * - **skein pooled**: `skein acp` (a pool of 1): `session/new` takes a CLI
 *   that is already up. The clock starts once that CLI has booted (its
 *   process is seen in the session's folder, then 3 s for it to initialize).
 *
 *   npx tsx bench/acp.ts        # 5 rounds after a warm-up
 *   npx tsx bench/acp.ts 10
 *
 * Offline: every agent gets the same FakeModel (in a process of its own, see
 * `support/fakeModelServer.ts`), a fresh config folder, working folder, temp
 * folder and HOME per run, and the full CLI (no `--bare`). The clock starts
 * after `initialize` is answered: the agents' own boot (tsx compiling skein's
 * sources, say) is not measured. Medians are reported, and each round's
 * ratio to the anchor (pairing cancels drifts in the machine's load).
 * claude-agent-acp is not a dependency of the repository: the bench
 * installs it on demand (`npm install --prefix <tmp>`) into a cached temp
 * folder, as `bench/startup.ts` does for the Agent SDK. Every agent gets
 * `IS_SANDBOX=1`: claude-agent-acp starts its CLI able to bypass
 * permissions, which the CLI refuses to root otherwise.
 */
import * as Acp from "@agentclientprotocol/sdk/unstable"
import { ClaudeCli } from "@skein/testkit"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Readline from "node:readline"
import { Readable, Writable } from "node:stream"
import { inheritedEnv, processesIn, type RunDirs, runDirs } from "./support/runDirs.js"

const rounds = Number(process.argv.slice(2).find((arg) => /^\d+$/.test(arg)) ?? 5)
const anchorVersion = "0.101.0"
const prompt = "Say hello"

const cli = await Effect.runPromise(Effect.orDie(ClaudeCli.executable))
const skeinBin = Path.resolve(import.meta.dirname, "../packages/cli/bin/skein.js")

const inherited = inheritedEnv()
const { fresh: freshDirs, root } = runDirs("acp")

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Waits until no process runs in the run's folder; kills stragglers after 10 s. */
const settle = async (d: RunDirs): Promise<void> => {
  const deadline = Date.now() + 10_000
  while (processesIn(d.cwd).length > 0) {
    if (Date.now() > deadline) for (const pid of processesIn(d.cwd)) process.kill(pid, "SIGKILL")
    await sleep(20)
  }
}

// --- the anchor, installed on demand ------------------------------------------

const installAnchor = (): string => {
  const dir = Path.join(Os.tmpdir(), `skein-bench-claude-agent-acp-${anchorVersion}`)
  const entry = Path.join(dir, "node_modules", "@agentclientprotocol", "claude-agent-acp", "dist", "index.js")
  if (!Fs.existsSync(entry)) {
    console.log(`installing @agentclientprotocol/claude-agent-acp@${anchorVersion} into ${dir} …`)
    // The CLI comes from this repository (CLAUDE_CODE_EXECUTABLE), so its bundled binaries (optional) are left out.
    ChildProcess.execFileSync("npm", [
      "install",
      "--prefix",
      dir,
      `@agentclientprotocol/claude-agent-acp@${anchorVersion}`,
      "--omit=optional",
      "--no-audit",
      "--no-fund",
      "--loglevel=error"
    ], { stdio: "inherit" })
  }
  return entry
}

// --- one run ------------------------------------------------------------------

interface Agent {
  readonly command: string
  readonly args: ReadonlyArray<string>
  /** Resolves once a `session/new` would be served warm, if the agent keeps anything warm. */
  readonly ready?: ((d: RunDirs) => Promise<void>) | undefined
}

interface Timing {
  readonly sessionNew: number
  readonly firstChunk: number
  /** From `session/new` sent to the first chunk: a cold CLI's boot counts wherever an agent puts it. */
  readonly total: number
}

const run = async (agent: Agent, baseUrl: string): Promise<Timing> => {
  const d = freshDirs()
  const child = ChildProcess.spawn(agent.command, agent.args, {
    cwd: d.cwd,
    env: {
      ...inherited,
      ...ClaudeCli.offlineEnv({ baseUrl, configDir: d.configDir, tmpDir: d.tmpDir }),
      CLAUDE_CODE_EXECUTABLE: cli,
      // claude-agent-acp offers bypassPermissions, which the CLI refuses to root outside a sandbox.
      IS_SANDBOX: "1"
    },
    stdio: ["pipe", "pipe", "ignore"]
  })
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  let firstChunk: ((at: number) => void) | undefined
  const connection = Acp.client({ name: "bench" })
    .onNotification("session/update", ({ params }) => {
      if (params.update.sessionUpdate === "agent_message_chunk" && firstChunk !== undefined) {
        firstChunk(performance.now())
        firstChunk = undefined
      }
    })
    .onRequest("session/request_permission", () => ({ outcome: { outcome: "cancelled" } }))
    .connect(Acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout)))
  try {
    await connection.agent.request("initialize", { protocolVersion: Acp.PROTOCOL_VERSION, clientCapabilities: {} })
    if (agent.ready !== undefined) await agent.ready(d)
    const t0 = performance.now()
    const { sessionId } = await connection.agent.request("session/new", { cwd: d.cwd, mcpServers: [] })
    const t1 = performance.now()
    const chunk = new Promise<number>((resolve) => (firstChunk = resolve))
    const t2 = performance.now()
    const answered = connection.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: prompt }] })
    const t3 = await chunk
    await answered
    return { sessionNew: t1 - t0, firstChunk: t3 - t2, total: t3 - t0 }
  } finally {
    child.stdin.end()
    await Promise.race([exited, sleep(10_000)])
    connection.close()
    await settle(d)
  }
}

/** skein's pool is warm once its CLI runs in the folder and has had time to initialize. */
const poolReady = async (d: RunDirs): Promise<void> => {
  while (processesIn(d.cwd).length < 2) await sleep(20)
  await sleep(3000)
}

// --- main ---------------------------------------------------------------------

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

const modelProcess = (): Promise<{ readonly url: string; readonly child: ChildProcess.ChildProcess }> =>
  new Promise((resolve, reject) => {
    const tsx = Path.resolve(import.meta.dirname, "../node_modules/.bin/tsx")
    const child = ChildProcess.spawn(tsx, [Path.resolve(import.meta.dirname, "support/fakeModelServer.ts")], {
      stdio: ["pipe", "pipe", "inherit"]
    })
    Readline.createInterface({ input: child.stdout }).once("line", (url) => resolve({ url, child }))
    child.once("exit", (code) => reject(new Error(`FakeModel's process exited (${code}) before it listened`)))
  })

const anchorEntry = installAnchor()
const model = await modelProcess()
const contenders: ReadonlyArray<readonly [string, Agent]> = [
  ["claude-agent-acp", { command: process.execPath, args: [anchorEntry] }],
  ["skein cold", { command: process.execPath, args: [skeinBin, "acp", "--pool", "0"] }],
  ["skein pooled", { command: process.execPath, args: [skeinBin, "acp", "--pool", "1"], ready: poolReady }]
]
console.log(`CLI at ${cli}; FakeModel at ${model.url} (its own process); ${rounds} rounds after a warm-up`)

const results = new Map<string, Array<Timing>>(contenders.map(([name]) => [name, []]))
try {
  for (let round = 0; round <= rounds; round++) {
    // Alternate the order, so no contender always runs right after another.
    const order = round % 2 === 0 ? contenders : [...contenders].reverse()
    for (const [name, agent] of order) {
      const timing = await run(agent, model.url)
      if (round > 0) results.get(name)!.push(timing)
    }
  }
} finally {
  model.child.stdin?.end()
}

const anchor = results.get("claude-agent-acp")!
const ratio = (name: string, field: keyof Timing) =>
  median(results.get(name)!.map((t, i) => t[field] / anchor[i]![field]))
console.log("")
console.log("contender          session/new (ms)  ×anchor   first chunk (ms)  ×anchor   new→chunk (ms)  ×anchor")
for (const [name] of contenders) {
  const timings = results.get(name)!
  const row = [
    name.padEnd(18),
    median(timings.map((t) => t.sessionNew)).toFixed(0).padStart(16),
    ratio(name, "sessionNew").toFixed(2).padStart(9),
    median(timings.map((t) => t.firstChunk)).toFixed(0).padStart(18),
    ratio(name, "firstChunk").toFixed(2).padStart(9),
    median(timings.map((t) => t.total)).toFixed(0).padStart(17),
    ratio(name, "total").toFixed(2).padStart(9)
  ]
  console.log(row.join(""))
}
Fs.rmSync(root, { recursive: true, force: true })
