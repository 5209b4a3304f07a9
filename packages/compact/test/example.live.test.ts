/**
 * `examples/compact.ts` over a session the real CLI stored: `--pass memory`
 * and `--pass summarize` (its CLI pointed at FakeModel with `--env`) compact
 * it, print before/after tokens, and the CLI resumed afterwards sends the
 * summary; a window that would keep everything, or a missing summary.md,
 * is one line on stderr and exit 1.
 */
import { describe, expect, it } from "@effect/vitest"
import { Session } from "@skein/session"
import { ResumeLoader } from "@skein/store"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Option } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as SessionMemoryCompaction from "../src/SessionMemoryCompaction.js"
import * as Live from "./live.js"

const repo = Path.resolve(import.meta.dirname, "..", "..", "..")

/** Runs the example to its exit; its own environment is offline too. */
const example = (args: ReadonlyArray<string>, env: Record<string, string | undefined>) =>
  Effect.async<{ readonly code: number | null; readonly stdout: string; readonly stderr: string }>((resume) => {
    const child = ChildProcess.spawn("npx", ["tsx", "examples/compact.ts", ...args], { cwd: repo, env: { ...process.env, ...env } })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    child.on("exit", (code) => resume(Effect.succeed({ code, stdout, stderr })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** A stored session of two turns, and the way to resume it in its cwd. */
const stored = (model: FakeModel.FakeModel["Type"]) =>
  Effect.gen(function*() {
    const first = yield* Live.converse({ model, prompts: [`first city? ${"Background detail. ".repeat(300)}`, "second city?"] })
    expect(first.exitCode).toBe(0)
    const file = yield* Live.sessionFile(first.run.configDir, first.run.cwd)
    const tmpDir = Fs.mkdtempSync(Path.join(first.run.configDir, "..", "tmp-"))
    const env = ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: first.run.configDir, tmpDir })
    const resume = (prompt: string) =>
      Effect.gen(function*() {
        const session = yield* Session.start({ cwd: file.cwd, configDir: first.run.configDir, env, bare: true, resume: file.id })
        const result = yield* Effect.flatMap(session.send(prompt), (t) => t.result)
        yield* session.end
        yield* session.exit
        return result
      }).pipe(Effect.scoped)
    return { ...file, configDir: first.run.configDir, env, resume }
  })

const fakeEnv = (model: FakeModel.FakeModel["Type"]) => [
  "--env",
  `ANTHROPIC_BASE_URL=${model.url}`,
  "--env",
  "ANTHROPIC_API_KEY=sk-ant-skein-offline-dummy",
  "--env",
  "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"
]

describe("examples/compact.ts", () => {
  it.scopedLive("--pass memory compacts with summary.md; --keep-messages that keeps everything, or no summary, exits 1 with one line", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.text("Paris first."), FakeModel.text("Rome second."), FakeModel.text("Berlin third.")]
      })
      const s = yield* stored(model)
      const noSummary = yield* example([s.id, "--root", s.configDir, "--pass", "memory"], s.env)
      expect(noSummary.code).toBe(1)
      expect(noSummary.stderr.trim().split("\n")).toEqual([`cannot compact ${s.id}: NoSummary`])

      const summaryFile = SessionMemoryCompaction.summaryPath(s.path)
      Fs.mkdirSync(Path.dirname(summaryFile), { recursive: true })
      Fs.writeFileSync(summaryFile, "Cities so far: Paris, then Rome.")
      const everything = yield* example([s.path, "--pass", "memory", "--keep-messages", "100", "--keep-tokens", "1000000"], s.env)
      expect(everything.code).toBe(1)
      expect(everything.stderr.trim().split("\n")).toEqual([`cannot compact ${s.id}: KeepsEverything`])
      expect(Option.isNone((yield* ResumeLoader.load(s.path)).boundary)).toBe(true)

      const done = yield* example([s.id, "--root", s.configDir, "--pass", "memory", "--keep-messages", "2", "--keep-tokens", "0"], s.env)
      expect(done.stderr).toBe("")
      expect(done.code).toBe(0)
      expect(done.stdout).toMatch(new RegExp(`^compacted ${s.id} \\(memory\\): \\d+ -> \\d+ tokens`))
      const third = yield* s.resume("third city?")
      expect(third.text).toBe("Berlin third.")
      const text = FakeModel.messagesText(yield* model.awaitRequest(0, Live.withPrompt("third city?")))
      expect(text).toContain("Cities so far: Paris, then Rome.")
      expect(text).not.toContain("first city?")
    }).pipe(Effect.provide(Live.sessionLayer)), { timeout: 180_000 })

  it.scopedLive("--pass summarize asks the CLI given by --env for the summary, in the session's cwd; the resumed CLI sends it", () =>
    Effect.gen(function*() {
      const asked = (request: FakeModel.RecordedRequest) =>
        FakeModel.anyMessages(request) && Live.lastUserText(request).includes("Context compaction")
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.text("Oslo first."),
          FakeModel.text("Lima second."),
          FakeModel.matching(FakeModel.text("<summary>Cities: Oslo, then Lima.</summary>"), asked),
          FakeModel.text("Cairo third.")
        ]
      })
      const s = yield* stored(model)
      const done = yield* example([s.id, "--root", s.configDir, "--pass", "summarize", "--keep-messages", "2", "--keep-tokens", "0", ...fakeEnv(model)], s.env)
      expect(done.stderr).toBe("")
      expect(done.code).toBe(0)
      expect(done.stdout).toMatch(new RegExp(`^compacted ${s.id} \\(summarize\\): \\d+ -> \\d+ tokens`))
      const summaryRequest = yield* model.awaitRequest(0, asked)
      expect(FakeModel.messagesText(summaryRequest)).toContain("first city?")
      // Only the session's own file is left in its project: the summarizer's copy is gone.
      expect(Fs.readdirSync(Path.dirname(s.path)).filter((f) => f.endsWith(".jsonl"))).toEqual([Path.basename(s.path)])

      const third = yield* s.resume("third city?")
      expect(third.text).toBe("Cairo third.")
      const text = FakeModel.messagesText(yield* model.awaitRequest(0, Live.withPrompt("third city?")))
      expect(text).toContain("Cities: Oslo, then Lima.")
      expect(text).not.toContain("first city?")
      expect((yield* model.requests).filter(asked)).toHaveLength(1)
    }).pipe(Effect.provide(Live.sessionLayer)), { timeout: 180_000 })
})
