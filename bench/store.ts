/**
 * The event log on three backings in one run: the file log (baseline),
 * sqlite and Postgres (a throwaway cluster over loopback). Appends per
 * second (one record per append, as serve publishes), replay throughput
 * (`read` from seq 1), and the latency a transcript mirror sync adds at a
 * turn's end on Postgres (one JSONL line of ~1 KB gained per turn).
 *
 *   npx tsx --conditions=@skein/source bench/store.ts [appends=2000] [turns=200]
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
const Message = Schema.Struct({ type: Schema.String, properties: Schema.Unknown })
const message = (i: number) => ({ type: "message.part.delta", properties: { sessionID: "ses_bench", delta: `token ${i} `.repeat(8) } })

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

  // Mirror latency: one ~1 KB line gained per turn, synced at turn end.
  const mirror = yield* TranscriptMirror.make.pipe(Effect.provideService(SqlStore.SqlStore, pgStore))
  const cli = "44444444-4444-4444-8444-444444444444"
  const transcript = Path.join(root, "config", "projects", "-bench", `${cli}.jsonl`)
  Fs.mkdirSync(Path.dirname(transcript), { recursive: true })
  const samples: Array<number> = []
  for (let i = 0; i < turns; i++) {
    Fs.appendFileSync(transcript, `${JSON.stringify({ type: "assistant", uuid: `u${i}`, text: "x".repeat(1000) })}\n`)
    const [ms] = yield* time(mirror.sync({ configDir: Path.join(root, "config"), cliSessionId: cli }))
    samples.push(ms)
  }
  samples.sort((a, b) => a - b)
  const rows = [["file (baseline)", file], ["sqlite", sqlite], ["postgres", pg]] as const
  console.log(`event log, ${appends} appends of one record each, then a replay of all`)
  for (const [name, r] of rows) {
    console.log(
      `${name.padEnd(16)} ${r.appendsPerSec.toFixed(0).padStart(8)} appends/s (${(r.appendsPerSec / file.appendsPerSec).toFixed(2)}x)` +
        `  ${r.replayPerSec.toFixed(0).padStart(9)} records/s replay (${(r.replayPerSec / file.replayPerSec).toFixed(2)}x)`
    )
  }
  const pct = (p: number) => samples[Math.min(samples.length - 1, Math.floor(p * samples.length))]!.toFixed(2)
  console.log(`mirror sync at turn end (postgres, loopback, ${turns} turns): p50 ${pct(0.5)} ms, p90 ${pct(0.9)} ms, p99 ${pct(0.99)} ms`)
})

Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(NodeContext.layer))).catch((e) => {
  console.error(e)
  process.exit(1)
})
