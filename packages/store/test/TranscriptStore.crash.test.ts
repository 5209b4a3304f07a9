import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import { TranscriptStore } from "@skein/store"
import { Deferred, Effect, Random } from "effect"
import * as TsChild from "@skein/testkit/TsChild"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const childEntry = fileURLToPath(new URL("./child/crashWriter.ts", import.meta.url))

/**
 * The child runs from a bundle: under tsx's loader every spawn would spend
 * about a second loading effect, and the test spawns fifty.
 */
const bundleChild = Effect.sync(() => TsChild.bundle(childEntry))

interface Run {
  readonly acked: ReadonlyArray<number>
  readonly repairs: number
  readonly signal: NodeJS.Signals | null
}

/** Starts the child, lets it append for `delayMs` after its first ack, then SIGKILLs it. */
const runAndKill = (bundle: string, path: string, first: number, delayMs: number) =>
  Effect.gen(function*() {
    const firstAck = yield* Deferred.make<void>()
    const exited = yield* Deferred.make<Run>()
    const acked: Array<number> = []
    let repairs = -1
    let buffered = ""
    const child = ChildProcess.spawn(process.execPath, [bundle, path, "crash-session", String(first)], {
      stdio: ["ignore", "pipe", "inherit"]
    })
    child.stdout.setEncoding("utf8")
    child.stdout.on("data", (text: string) => {
      buffered += text
      const lines = buffered.split("\n")
      buffered = lines.pop() ?? ""
      for (const line of lines) {
        const [word, n] = line.split(" ")
        if (word === "open") repairs = Number(n)
        if (word === "ack") {
          acked.push(Number(n))
          Deferred.unsafeDone(firstAck, Effect.void)
        }
      }
    })
    child.once("exit", (_code, signal) => Deferred.unsafeDone(exited, Effect.succeed({ acked, repairs, signal })))
    yield* Effect.race(Deferred.await(firstAck), Deferred.await(exited))
    yield* Effect.sleep(delayMs)
    child.kill("SIGKILL")
    return yield* Deferred.await(exited)
  })

describe("TranscriptStore crash safety", () => {
  it.scopedLive("SIGKILLed 50 times mid-append: the file always loads and keeps every acknowledged entry", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const bundle = yield* bundleChild
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "skein-crash-" })
      const acknowledged = new Set<number>()
      let path = ""
      let repaired = 0
      let total = 0
      for (let run = 0; run < 50; run++) {
        // A new file every ten runs keeps the 4 MB entries from piling up.
        if (run % 10 === 0) {
          if (path !== "") yield* fs.remove(path)
          path = Path.join(dir, `crash-${run}.jsonl`)
          acknowledged.clear()
        }
        const delayMs = yield* Random.nextIntBetween(0, 40)
        const result = yield* runAndKill(bundle, path, run * 100_000, delayMs)
        expect(result.signal).toBe("SIGKILL")
        expect(result.acked.length).toBeGreaterThan(0)
        if (result.repairs > 0) repaired++
        total += result.acked.length
        for (const n of result.acked) acknowledged.add(n)

        // The killed file loads: at most its last line is torn, and it is only a diagnostic.
        const loaded = yield* TranscriptStore.read(path)
        expect(loaded.diagnostics.length).toBeLessThanOrEqual(1)
        const present = new Set(
          loaded.entries.map((entry) => "uuid" in entry ? entry.uuid : "")
        )
        for (const n of acknowledged) expect(present.has(`entry-${n}`)).toBe(true)
      }
      // After a final repairing open, nothing is malformed at all.
      yield* Effect.scoped(TranscriptStore.makeWriter({ path, sessionId: "crash-session", reAppendOnClose: false }))
      const final = yield* TranscriptStore.read(path)
      expect(final.diagnostics).toEqual([])
      expect(final.entries.length).toBeGreaterThanOrEqual(acknowledged.size)
      yield* Effect.logInfo("crash test").pipe(
        Effect.annotateLogs({ acknowledged: total, runsThatRepairedOnOpen: repaired })
      )
    }).pipe(Effect.provide(NodeContext.layer)), { timeout: 120_000 })
})
