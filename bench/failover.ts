/**
 * Failover of a cluster runner: three runner processes over a throwaway
 * Postgres (real CLI, FakeModel), one of them SIGKILLed per round. Measures
 * the time from the kill to the first event of the next prompt, sent through
 * another runner's edge to the session the dead runner hosted (its shard must
 * move, its transcript be restored, its CLI resume). Prints median and max
 * against the targets (≤ 10 s median, ≤ 20 s max).
 *
 *   npx tsx bench/failover.ts [rounds=10]
 *
 * The per-hop cost of an edge on one runner and the entity on another,
 * against the in-process registry, is `bench/hop.ts`.
 */
import { ClaudeCli, FakeModel, Postgres } from "@skein/testkit"
import { Effect, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Processes from "../packages/cluster/test/processes.js"
import type { RunnerConfig } from "../packages/cluster/test/runner.js"

const rounds = Number(process.argv[2] ?? 10)
const token = "bench-token-0123456789"

const call = (url: string) => Processes.api(url, token)

const stats = (xs: ReadonlyArray<number>) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return { median: sorted[Math.floor(sorted.length / 2)]!, max: sorted.at(-1)! }
}

const program = Effect.gen(function*() {
  const pg = yield* Postgres.start()
  const database = Redacted.value(yield* pg.database("failover"))
  const model = yield* FakeModel.make({ fallback: (request) => FakeModel.text(`Answer to ${FakeModel.promptOf(request)}.`) })
  const shared = yield* ClaudeCli.offlineDirs("skein-bench-failover-")
  const cwd = Fs.realpathSync(shared.cwd)
  let generation = 0
  const configFor = (slot: number): RunnerConfig => {
    const root = Path.join(shared.root, `r${slot}-${generation++}`)
    for (const d of ["config", "tmp"]) Fs.mkdirSync(Path.join(root, d), { recursive: true })
    return { database, configDir: Path.join(root, "config"), tmpDir: Path.join(root, "tmp"), cwd, modelUrl: model.url, runnerPort: 34631 + slot, token, runner: "Socket" }
  }
  const live: Array<Processes.RunnerProcess> = yield* Effect.forEach([0, 1, 2], (slot) => Processes.spawnRunner(configFor(slot)), { concurrency: "unbounded" })
  // Runners listen before they have seen each other: until the shards settle a session can move after its first turn.
  yield* Processes.awaitShardsSettled(database, live)
  const times: Array<number> = []
  for (let round = 0; round < rounds; round++) {
    // A session placed by its first prompt: the runner that ran it (the turn ledger names its pid) hosts it.
    const entry = live[round % 3]!
    const session = yield* Effect.promise(() => call(entry.url)("POST", `/session?directory=${encodeURIComponent(cwd)}`, {}))
    yield* Effect.promise(() => call(entry.url)("POST", `/session/${session.id}/message`, { parts: [{ type: "text", text: `round ${round}` }] }))
    const [first] = yield* Processes.turns(database, session.id)
    const slot = live.findIndex((r) => r.child.pid === first?.pid)
    const host = live[slot]!
    const edge = live.find((r) => r !== host)!
    const watcher = Processes.subscribe(edge.url, token, cwd)
    yield* Effect.promise(() => watcher.until((f) => f.type === "server.connected", 10_000))
    const start = performance.now()
    yield* Processes.kill(host)
    const seenBefore = watcher.frames.length
    yield* Effect.promise(() => call(edge.url)("POST", `/session/${session.id}/prompt_async`, { parts: [{ type: "text", text: `after kill ${round}` }] }))
    yield* Effect.promise(() =>
      watcher.until((f) => f.type === "message.part.updated" && f.properties["sessionID"] === session.id && watcher.frames.indexOf(f) >= seenBefore, 60_000)
    )
    const ms = performance.now() - start
    times.push(ms)
    watcher.close()
    console.log(`round ${round + 1}: killed runner ${slot}, first event of the next prompt on another runner after ${(ms / 1000).toFixed(2)} s`)
    live[slot] = yield* Processes.spawnRunner(configFor(slot))
    // The shards rebalance onto the new runner before the next round's session is placed.
    yield* Processes.awaitShardsSettled(database, live)
  }
  const { max, median } = stats(times)
  console.log(`failover over ${rounds} SIGKILLs: median ${(median / 1000).toFixed(2)} s (target ≤ 10 s: ${median <= 10_000 ? "met" : "NOT met"}), max ${(max / 1000).toFixed(2)} s (target ≤ 20 s: ${max <= 20_000 ? "met" : "NOT met"})`)
})

Effect.runPromise(Effect.scoped(program)).then(() => process.exit(0), (e) => {
  console.error(e)
  process.exit(0)
})
