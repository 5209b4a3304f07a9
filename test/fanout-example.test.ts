/**
 * examples/fanout.ts as a user runs it: the real CLI forks three workers
 * against the example's embedded FakeModel, and the example cleans up after
 * itself.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const repo = path.resolve(import.meta.dirname, "..")
const tsx = path.join(repo, "node_modules", ".bin", "tsx")

describe("examples/fanout", () => {
  it.scopedLive("forks three workers, prints their answers, exits 0 and leaves nothing behind", () =>
    Effect.gen(function*() {
      const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "skein-fanout-test-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(tmp, { recursive: true, force: true })))
      const result = yield* Effect.promise(() =>
        new Promise<{ readonly code: number | null; readonly stdout: string; readonly stderr: string }>((resolve) => {
          // The example's scratch folder goes under TMPDIR, so what it leaves behind shows up there.
          const child = ChildProcess.spawn(tsx, [path.join(repo, "examples", "fanout.ts")], {
            env: { ...process.env, TMPDIR: tmp },
            stdio: ["ignore", "pipe", "pipe"]
          })
          let stdout = ""
          let stderr = ""
          child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
          child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
          child.on("close", (code) => resolve({ code, stdout, stderr }))
        })
      )
      expect(result.stderr).toBe("")
      expect(result.code).toBe(0)
      expect(result.stdout).toContain("forked 3 workers")
      expect(result.stdout).toContain("Four at a time by default")
      expect(result.stdout).toContain("They are killed with it")
      expect(result.stdout).toContain("To its own sidechain file")
      expect(result.stdout.match(/\/subagents\/agent-(scaling|failure|records)-[0-9a-f-]{36}\.jsonl/g)).toHaveLength(3)
      expect(result.stdout).toContain("every worker's first request starts with the parent's brief: true")
      expect(result.stdout).toContain("the parent's transcript holds no worker entries: true")
      // (tsx keeps its own cache there too.)
      expect(fs.readdirSync(tmp).filter((name) => name.startsWith("skein-fanout-"))).toEqual([])
    }), { timeout: 120_000 })
})
