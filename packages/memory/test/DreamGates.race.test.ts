import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { expect, layer } from "@effect/vitest"
import * as TsChild from "@skein/testkit/TsChild"
import { Effect, Stream } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const here = path.dirname(fileURLToPath(import.meta.url))
const repoRoot = path.resolve(here, "../../..")
const racer = path.join(here, "fixtures", "dream-racer.ts")
const T0 = Date.UTC(2026, 0, 1)
const WINDOW = 25 * 3_600_000

layer(NodeContext.layer)("DreamGates across processes", (it) => {
  it.scoped("two OS processes race the gates 100 times: exactly one dream per window, never two", () =>
    Effect.gen(function*() {
      const root = yield* Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "skein-dream-race-" }))
      const projectDir = path.join(root, "project")
      const memoryDir = path.join(projectDir, "memory")
      const barrier = path.join(root, "barrier")
      const log = path.join(root, "log")
      fs.mkdirSync(memoryDir, { recursive: true })
      fs.mkdirSync(barrier)
      // Five sessions modified after every window's last run.
      const later = new Date(T0 + 200 * WINDOW)
      for (let i = 0; i < 5; i++) {
        const file = path.join(projectDir, `s${i}.jsonl`)
        fs.writeFileSync(file, "")
        fs.utimesSync(file, later, later)
      }
      const rounds = 100
      const run = Effect.scoped(Effect.gen(function*() {
        const child = yield* Command.start(
          Command.make(process.execPath, ...TsChild.nodeArgs(racer), memoryDir, projectDir, log, barrier, String(rounds)).pipe(
            Command.workingDirectory(repoRoot)
          )
        )
        const [stderr, code] = yield* Effect.all(
          [Stream.mkString(Stream.decodeText(child.stderr)), child.exitCode],
          { concurrency: "unbounded" }
        )
        expect(stderr).toBe("")
        expect(code).toBe(0)
        return child.pid
      }))
      const pids = yield* Effect.all([run, run], { concurrency: 2 })
      const lines = fs.readFileSync(log, "utf8").trim().split("\n").map((line) => line.split(" "))
      expect(lines.some(([, event]) => event === "overlap")).toBe(false)
      const dreams = new Map<string, Array<string>>()
      const stops = new Map<string, number>()
      for (const [pid = "", event = "", i = "", gate = ""] of lines) {
        if (event === "dream") dreams.set(i, [...(dreams.get(i) ?? []), pid])
        else stops.set(gate, (stops.get(gate) ?? 0) + 1)
      }
      expect(lines.length).toBe(2 * rounds)
      for (let i = 0; i < rounds; i++) expect(dreams.get(String(i))?.length).toBe(1)
      // Both won some windows, and the loser was stopped by the lock or by the time seen again.
      const winners = new Set([...dreams.values()].flat())
      expect([...winners].sort()).toEqual(pids.map(String).sort())
      expect([...stops.keys()].every((gate) => gate === "time" || gate === "lock")).toBe(true)
      const lock = path.join(memoryDir, ".consolidate-lock")
      expect(fs.statSync(lock).mtimeMs).toBe(T0 + (rounds - 1) * WINDOW)
      expect(fs.readdirSync(memoryDir).filter((name) => name !== ".consolidate-lock")).toEqual([])
    }), { timeout: 120_000 })
})
