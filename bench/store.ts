/**
 * The event log on three backings in one run: the file log (baseline),
 * sqlite and Postgres (a throwaway cluster over loopback). Appends per
 * second (one record per append, as serve publishes), replay throughput
 * (`read` from seq 1), and the latency a transcript mirror sync adds at a
 * turn's end on Postgres (one JSONL line of ~1 KB gained per turn), in
 * rounds: the mirror as serve runs it (it knows what it mirrored last, so a
 * sync is one write), a cold mirror (it looks the rows up first, as after a
 * restart or a failed sync), and one `SELECT 1` round trip as the floor.
 * Target: p50 ≤ 5 ms on Postgres over loopback.
 *
 *   npx tsx --conditions=@skein/source bench/store.ts [appends=2000] [turns=200] [rounds=3]
 */
import { NodeContext } from "@effect/platform-node"
import { SqlEventLog, SqlStore, StoreUrl, TranscriptMirror } from "@skein/sql"
import { EventLog } from "@skein/store"
import { Postgres } from "@skein/testkit"
import { Duration, Effect, Schema, Stream } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

const appends = Number(process.argv[2] ?? 2000)
const turns = Number(process.argv[3] ?? 200)
const rounds = Number(process.argv[4] ?? 3)
const Message = Schema.Struct({ type: Schema.String, properties: Schema.Unknown })
const message = (i: number) => ({ type: "message.part.delta", properties: { sessionID: "ses_bench", delta: `token ${i} `.repeat(8) } })

const percentile = (xs: ReadonlyArray<number>, p: number) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!
}

const time = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.map(Effect.timed(effect), ([d, a]) => [Duration.toMillis(d), a] as const)

const measure = (log: EventLog.EventLog<typeof Message.Type>) =>
  Effect.gen(function*() {
    const [appendMs] = yield* time(Effect.forEach(Array.from({ length: appends }, (_, i) => i), (i) => log.append(message(i)), { discard: true }))
    const [replayMs, n] = yield* time(Stream.runCount(log.read(1)))
    return { appendsPerSec: appends / (appendMs / 1000), replayPerSec: n / (replayMs / 1000) }
  })

const program = Effect.gen(function*() {
  const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-bench-store-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(root, { recursive: true, force: true })))
  const file = yield* measure(yield* EventLog.open({ dir: Path.join(root, "events"), schema: Message }))
  const sqliteStore = yield* SqlStore.make(yield* StoreUrl.parse(`sqlite:${Path.join(root, "store.db")}`))
  const sqlite = yield* measure(yield* SqlEventLog.open({ name: "bench", schema: Message }).pipe(Effect.provideService(SqlStore.SqlStore, sqliteStore)))
  const server = yield* Postgres.start()
  const pgStore = yield* SqlStore.make({ _tag: "Postgres", url: yield* server.database("bench") })
  const pg = yield* measure(yield* SqlEventLog.open({ name: "bench", schema: Message }).pipe(Effect.provideService(SqlStore.SqlStore, pgStore)))

  // Mirror latency: one ~1 KB line gained per turn, synced at turn end; each round interleaves the three.
  const withPg = Effect.provideService(SqlStore.SqlStore, pgStore)
  const mirror = yield* TranscriptMirror.make.pipe(withPg)
  const config = Path.join(root, "config")
  const p50s = { warm: [] as Array<number>, cold: [] as Array<number>, trip: [] as Array<number> }
  let lastWarm: ReadonlyArray<number> = []
  for (let round = 0; round < rounds; round++) {
    const warm = `44444444-4444-4444-8444-${String(round).padStart(12, "0")}`
    const cold = `55555555-5555-4555-8555-${String(round).padStart(12, "0")}`
    const samples = { warm: [] as Array<number>, cold: [] as Array<number>, trip: [] as Array<number> }
    Fs.mkdirSync(Path.join(config, "projects", "-bench"), { recursive: true })
    for (let i = 0; i < turns; i++) {
      const line = `${JSON.stringify({ type: "assistant", uuid: `u${i}`, text: "x".repeat(1000) })}\n`
      for (const cli of [warm, cold]) Fs.appendFileSync(Path.join(config, "projects", "-bench", `${cli}.jsonl`), line)
      samples.warm.push((yield* time(mirror.sync({ configDir: config, cliSessionId: warm })))[0])
      const fresh = yield* TranscriptMirror.make.pipe(withPg)
      samples.cold.push((yield* time(fresh.sync({ configDir: config, cliSessionId: cold })))[0])
      samples.trip.push((yield* time(pgStore.sql`SELECT 1`))[0])
    }
    for (const key of ["warm", "cold", "trip"] as const) p50s[key].push(percentile(samples[key], 0.5))
    lastWarm = samples.warm
  }
  const samples = [...lastWarm].sort((a, b) => a - b)
  const rows = [["file (baseline)", file], ["sqlite", sqlite], ["postgres", pg]] as const
  console.log(`event log, ${appends} appends of one record each, then a replay of all`)
  for (const [name, r] of rows) {
    console.log(
      `${name.padEnd(16)} ${r.appendsPerSec.toFixed(0).padStart(8)} appends/s (${(r.appendsPerSec / file.appendsPerSec).toFixed(2)}x)` +
        `  ${r.replayPerSec.toFixed(0).padStart(9)} records/s replay (${(r.replayPerSec / file.replayPerSec).toFixed(2)}x)`
    )
  }
  const pct = (p: number) => percentile(samples, p).toFixed(2)
  const best = (xs: ReadonlyArray<number>) => Math.min(...xs)
  const median = (xs: ReadonlyArray<number>) => percentile(xs, 0.5)
  const show = (xs: ReadonlyArray<number>) => `best ${best(xs).toFixed(2)} ms, median ${median(xs).toFixed(2)} ms`
  console.log(`mirror sync at turn end (postgres, loopback, ${turns} turns a round, ${rounds} rounds), p50 per round:`)
  console.log(`  serve's mirror   ${show(p50s.warm)}  (last round p90 ${pct(0.9)} ms, p99 ${pct(0.99)} ms)`)
  console.log(`  cold mirror      ${show(p50s.cold)}  (${(median(p50s.cold) / median(p50s.warm)).toFixed(2)}x serve's)`)
  console.log(`  SELECT 1         ${show(p50s.trip)}  (serve's mirror = ${(median(p50s.warm) / median(p50s.trip)).toFixed(2)}x a round trip, file reads included)`)
  console.log(`target p50 <= 5 ms: ${median(p50s.warm) <= 5 ? "met" : "NOT met"} (median of rounds ${median(p50s.warm).toFixed(2)} ms, best ${best(p50s.warm).toFixed(2)} ms)`)
})

Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(NodeContext.layer))).catch((e) => {
  console.error(e)
  process.exit(1)
})
