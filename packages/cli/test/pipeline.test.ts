/**
 * `skein pipeline run` as a person runs it: examples/pipeline.ts against the
 * fake model, its events as NDJSON, Ctrl-C in the middle and a resume.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Path from "node:path"
import * as Skein from "./skein.js"

const example = Path.resolve(import.meta.dirname, "../../../examples/pipeline.ts")

interface Line {
  readonly _tag: string
  readonly recorded?: boolean
  readonly outputs?: ReadonlyArray<{ readonly items: ReadonlyArray<{ readonly file: string; readonly risk: string }>; readonly output: { readonly text: string } }>
}

const lines = (stdout: string): ReadonlyArray<Line> =>
  stdout.split("\n").filter((line) => line.length > 0).map((line): Line => JSON.parse(line))

describe("skein pipeline run", () => {
  it.scopedLive("--json --fake-model: events as NDJSON, then the outputs; Ctrl-C exits 130 with the run id, and --resume skips what is done", () =>
    Effect.gen(function*() {
      const dir = yield* Skein.folder
      const journal = Path.join(dir, "journal.db")
      const args = ["pipeline", "run", example, "--fake-model", "--json", "--journal", journal, "--concurrency", "2"]

      const whole = yield* Skein.skein(args, { cwd: dir })
      expect(whole.code).toBe(0)
      const events = lines(whole.stdout)
      expect(events[0]).toMatchObject({ _tag: "RunStarted" })
      const result = events.at(-1)!
      expect(result._tag).toBe("RunResult")
      expect(result.outputs![0]!.output.text).toMatch(/^\d+ files reviewed, \d+ high risk\.$/)
      expect(whole.stderr).toMatch(/^skein: run [0-9a-f-]{36}\n/)

      // Ctrl-C after the first result: the run stops, says how to resume, and leaves no CLI behind.
      let interrupted = false
      const stopped = yield* Skein.skein(args, {
        cwd: dir,
        onStdout: (child, stdout) => {
          if (!interrupted && stdout.includes("\"_tag\":\"ItemDone\"")) {
            interrupted = true
            child.kill("SIGINT")
          }
        }
      })
      expect(stopped.code).toBe(130)
      const runId = /interrupted run (\S+); resume with: skein pipeline run .* --resume (\S+)/.exec(stopped.stderr)
      expect(runId?.[1]).toBeDefined()
      expect(runId?.[2]).toBe(runId?.[1])
      expect(Skein.processesIn(dir)).toEqual([])
      const doneBefore = lines(stopped.stdout).filter((e) => e._tag === "ItemDone").length
      expect(doneBefore).toBeGreaterThanOrEqual(1)

      const resumed = yield* Skein.skein([...args, "--resume", runId![1]!], { cwd: dir })
      expect(resumed.code).toBe(0)
      const again = lines(resumed.stdout)
      expect(again.filter((e) => e._tag === "ItemDone" && e.recorded === true).length).toBeGreaterThanOrEqual(doneBefore)
      expect(again.at(-1)).toEqual({ ...result, runId: runId![1] })
    }), 180_000)

  it.scopedLive("a budget of 0 is refused before anything runs", () =>
    Effect.gen(function*() {
      const dir = yield* Skein.folder
      const ran = yield* Skein.skein(["pipeline", "run", example, "--fake-model", "--budget", "0", "--journal", Path.join(dir, "j.db")], { cwd: dir })
      expect(Skein.errorLine(ran)).toContain("budget usd must be a number above 0")
      expect(ran.code).toBe(2)
    }), 60_000)
})
