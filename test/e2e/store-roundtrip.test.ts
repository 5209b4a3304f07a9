/**
 * Round trips between skein's store and the real CLI: skein loads what the
 * CLI wrote (a compacted session included), and the CLI resumes what skein
 * branched. FakeModel's request log is the judge: after `--resume`, the
 * messages before the new prompt must equal skein's effective conversation.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import type { Anthropic } from "@skein/protocol"
import { Branch, ResumeLoader, TranscriptLayout } from "@skein/store"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Option, Ref, Stream } from "effect"
import * as fs from "node:fs"

/** Sends the prompts one turn at a time (each after the previous `result`), then closes stdin. */
const converse = (options: {
  readonly model: FakeModel.FakeModel["Type"]
  readonly prompts: ReadonlyArray<string>
  readonly args?: ReadonlyArray<string>
  readonly configDir?: string
}) =>
  Effect.gen(function*() {
    const run = yield* ClaudeCli.spawn({
      baseUrl: options.model.url,
      args: [...ClaudeCli.streamJsonArgs, ...ClaudeCli.leanArgs, ...(options.args ?? [])],
      env: options.configDir === undefined ? undefined : { CLAUDE_CONFIG_DIR: options.configDir }
    })
    const next = yield* Ref.make(0)
    const sendNext = Effect.gen(function*() {
      const i = yield* Ref.getAndUpdate(next, (n) => n + 1)
      const prompt = options.prompts[i]
      yield* prompt === undefined ? run.closeStdin : Effect.orDie(run.send(ClaudeCli.userMessage(prompt)))
    })
    yield* sendNext
    yield* ClaudeCli.lines(run.stdout).pipe(
      Stream.runForEach((line) => line.startsWith("{") && JSON.parse(line).type === "result" ? sendNext : Effect.void)
    )
    expect(yield* run.exitCode).toBe(0)
    return run
  })

/** The one session file the CLI wrote for `cwd`, found through skein's layout (so the folder name is checked too). */
const sessionFile = (configDir: string, cwd: string) =>
  Effect.sync(() => {
    const dir = TranscriptLayout.make(configDir).projectDir(fs.realpathSync(cwd))
    const files = fs.readdirSync(dir).filter((name) => name.endsWith(".jsonl"))
    expect(files).toHaveLength(1)
    const id = Option.getOrThrow(TranscriptLayout.sessionIdOfFile(files[0]!))
    return { id, path: `${dir}/${files[0]!}` }
  })

const stripCacheControl = (value: unknown): unknown =>
  Array.isArray(value)
    ? value.map(stripCacheControl)
    : typeof value === "object" && value !== null
    ? Object.fromEntries(Object.entries(value).filter(([key]) => key !== "cache_control").map(([k, v]) => [k, stripCacheControl(v)]))
    : value

/**
 * The history a request carries before its new prompt. The CLI adds one
 * `system`-role message of request settings (not from the transcript) and
 * cache_control marks; both are dropped.
 */
const history = (request: FakeModel.RecordedRequest, prompt: string): unknown => {
  const body = Option.getOrThrow(request.messagesRequest)
  const messages = body.messages.filter((message) => message.role !== "system")
  const last = messages[messages.length - 1]
  expect(stripCacheControl(last)).toEqual({ role: "user", content: [{ type: "text", text: prompt }] })
  return stripCacheControl(messages.slice(0, -1))
}

const textOf = (message: Anthropic.MessageParam): string =>
  typeof message.content === "string"
    ? message.content
    : message.content.map((block) => "text" in block ? block.text : block.type).join("|")

const withPrompt = (prompt: string): FakeModel.RequestMatch => (request) =>
  FakeModel.isConversation(request) && FakeModel.messagesText(request).includes(prompt)

describe("store round trips with the real CLI", () => {
  it.scopedLive("loads a /compact-ed session from its boundary, exactly as the CLI resumes it", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.text("Answer one."),
          FakeModel.text("Answer two."),
          FakeModel.compactSummary("We discussed questions one and two."),
          FakeModel.text("Answer three.")
        ]
      })
      const first = yield* converse({ model, prompts: ["first question", "second question", "/compact", "after compact"] })
      const session = yield* sessionFile(first.configDir, first.cwd)

      const view = yield* ResumeLoader.load(session.path)
      const boundary = Option.getOrThrow(view.boundary)
      expect(boundary.subtype).toBe("compact_boundary")
      expect(view.entries[0]).toBe(boundary)
      expect(view.stats.tailOffset).toBeGreaterThan(0)
      const summary = view.entries[1]
      expect(summary?.type === "user" && summary.isCompactSummary).toBe(true)
      const texts = view.messages.map(textOf)
      expect(texts[0]).toContain("We discussed questions one and two.")
      // The CLI keeps the last answer before the boundary verbatim (compactMetadata.preservedSegment).
      expect(texts[1]).toBe("Answer two.")
      expect(texts.join("\n")).not.toContain("first question")
      expect(texts.join("\n")).toContain("after compact")
      expect(texts[texts.length - 1]).toBe("Answer three.")
      expect(view.diagnostics.filter((d) => d._tag !== "Relinked")).toEqual([])
      expect(view.sessionId).toBe(session.id)

      yield* converse({ model, prompts: ["resumed question"], args: ["--resume", session.id], configDir: first.configDir })
      const resumed = yield* model.awaitRequest(0, withPrompt("resumed question"))
      expect(history(resumed, "resumed question")).toEqual(stripCacheControl(view.messages))
    }).pipe(Effect.provide(NodeContext.layer)), { timeout: 120_000 })

  it.scopedLive("the CLI resumes a branch skein wrote, with exactly the branch's history", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.combine(
            FakeModel.thinking("Check the shell."),
            FakeModel.text("Running it."),
            FakeModel.toolUse("Bash", { command: "echo branch-me", description: "echo" })
          ),
          FakeModel.text("It printed branch-me."),
          FakeModel.text("A later answer, not in the branch."),
          FakeModel.text("Answer on the branch.")
        ]
      })
      const first = yield* converse({
        model,
        prompts: ["run the echo", "a later question"],
        args: ["--allowedTools", "Bash"]
      })
      const parent = yield* sessionFile(first.configDir, first.cwd)
      const whole = yield* ResumeLoader.load(parent.path)
      const branchPoint = whole.entries.find((entry) =>
        entry.type === "assistant" && JSON.stringify(entry.message.content).includes("It printed branch-me.")
      )
      expect(branchPoint).toBeDefined()

      const branched = yield* Branch.branch(parent.path, { at: branchPoint!.uuid })
      const expected = (yield* ResumeLoader.load(parent.path, { resumeAt: branchPoint!.uuid })).messages
      expect(expected.map(textOf)).toEqual([
        "run the echo",
        "thinking|Running it.|tool_use",
        "tool_result",
        "It printed branch-me."
      ])
      expect((yield* ResumeLoader.load(branched.path)).messages).toEqual(expected)

      yield* converse({ model, prompts: ["on the branch"], args: ["--resume", branched.sessionId], configDir: first.configDir })
      const request = yield* model.awaitRequest(0, withPrompt("on the branch"))
      expect(history(request, "on the branch")).toEqual(stripCacheControl(expected))
      expect(FakeModel.messagesText(request)).not.toContain("a later question")

      // The CLI kept appending to the branch, under the branch's id, after our chain.
      const after = yield* ResumeLoader.load(branched.path)
      expect(after.sessionId).toBe(branched.sessionId)
      expect(after.messages.map(textOf).slice(-2)).toEqual(["on the branch", "Answer on the branch."])
      const fsys = yield* FileSystem.FileSystem
      expect(yield* fsys.exists(parent.path)).toBe(true)
    }).pipe(Effect.provide(NodeContext.layer)), { timeout: 120_000 })
})
