/**
 * Crash-test child: appends user entries through a TranscriptStore writer
 * (per-entry fsync) and prints `ack <n>` after each append returned, until
 * it is killed. Arguments: <transcript path> <session id> <first n>.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Effect } from "effect"
import * as TranscriptStore from "../../src/TranscriptStore.js"

const [path = "", sessionId = "", first = "0"] = process.argv.slice(2)

const entry = (n: number) => ({
  type: "user",
  uuid: `entry-${n}`,
  parentUuid: n === 0 ? null : `entry-${n - 1}`,
  isSidechain: false,
  sessionId,
  timestamp: new Date(0).toISOString(),
  cwd: "/crash",
  // Sizes from a few bytes to 4 MB: a kill can land in the middle of a large write.
  message: { role: "user", content: `n=${n} ${"x".repeat(n % 4 === 1 ? 4_000_000 : (n * 997) % 3000)}` }
})

const program = Effect.gen(function*() {
  const writer = yield* TranscriptStore.makeWriter({ path, sessionId, fsync: TranscriptStore.perEntry })
  process.stdout.write(`open ${writer.repairs.length}\n`)
  for (let n = Number(first); ; n++) {
    yield* writer.append(entry(n))
    process.stdout.write(`ack ${n}\n`)
  }
})

Effect.runPromise(Effect.scoped(program).pipe(Effect.provide(NodeFileSystem.layer))).catch((error) => {
  process.stderr.write(`${String(error)}\n`)
  process.exit(1)
})
