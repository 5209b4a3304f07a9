import { describe, expect, it } from "@effect/vitest"
import { Effect, Option, Stream } from "effect"
import * as Path from "node:path"
import * as ClaudeCli from "../../src/ClaudeCli.js"
import * as FakeModel from "../../src/FakeModel.js"
import * as ProcessTree from "../../src/internal/processTree.js"

const parse = (line: string): Record<string, unknown> => {
  const value: unknown = JSON.parse(line)
  expect(typeof value).toBe("object")
  return value !== null && typeof value === "object" ? { ...value } : {}
}

describe("ClaudeCli", () => {
  it.scoped("offlineEnv has what an offline run needs", () =>
    Effect.sync(() => {
      const env = ClaudeCli.offlineEnv({ baseUrl: "http://127.0.0.1:1", configDir: "/tmp/c" })
      expect(env).toMatchObject({
        ANTHROPIC_BASE_URL: "http://127.0.0.1:1",
        CLAUDE_CONFIG_DIR: "/tmp/c",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1"
      })
      expect(env.ANTHROPIC_API_KEY?.length).toBeGreaterThan(0)
    }))

  it.effect("finds the installed executable", () =>
    Effect.gen(function*() {
      const path = yield* ClaudeCli.executable
      expect(path.endsWith(Path.join("@anthropic-ai", "claude-code", "bin", "claude.exe"))).toBe(true)
    }))

  it.scopedLive("the real CLI runs one turn against FakeModel", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.text("Hello from the fake model, in several chunks.")]
      })
      const turn = yield* ClaudeCli.runTurn({ baseUrl: model.url, prompt: "Please say hello to skein" })
      expect(turn.exitCode).toBe(0)

      const conversation = yield* model.awaitRequest(0, FakeModel.isConversation)
      expect(conversation.url).toContain("/v1/messages")
      expect(FakeModel.messagesText(conversation)).toContain("Please say hello to skein")
      expect(Option.isSome(conversation.messagesRequest)).toBe(true)
      expect(yield* model.remaining).toEqual([])

      const messages = turn.lines.map(parse)
      const init = messages.find((m) => m.type === "system" && m.subtype === "init")
      expect(init).toBeDefined()
      const assistant = messages.find((m) => m.type === "assistant")
      expect(JSON.stringify(assistant)).toContain("Hello from the fake model, in several chunks.")
      const result = messages.find((m) => m.type === "result")
      expect(result).toMatchObject({ subtype: "success", result: "Hello from the fake model, in several chunks." })
      expect(messages.indexOf(init!)).toBeLessThan(messages.indexOf(result!))
    }))

  it.scopedLive("kills the process group and removes the temp dirs when the scope closes", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make()
      const { cwd, pid } = yield* Effect.scoped(
        Effect.gen(function*() {
          const run = yield* ClaudeCli.spawn({ baseUrl: model.url, args: [...ClaudeCli.streamJsonArgs, "--bare"] })
          return { cwd: run.cwd, pid: run.pid }
        })
      )
      const alive = (() => {
        try {
          process.kill(pid, 0)
          return true
        } catch {
          return false
        }
      })()
      expect(alive).toBe(false)
      const { existsSync } = yield* Effect.promise(() => import("node:fs"))
      expect(existsSync(cwd)).toBe(false)
    }))

  it.scopedLive("kills the background shells the CLI started in sessions of their own", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.toolUse("Bash", { command: "sleep 600", description: "Sleep", run_in_background: true }),
          FakeModel.text("Sleeping in the background.")
        ]
      })
      const { marker, before } = yield* Effect.scoped(
        Effect.gen(function*() {
          const run = yield* ClaudeCli.spawn({
            baseUrl: model.url,
            // Not lean: --bare drops Bash's run_in_background parameter.
            args: [...ClaudeCli.streamJsonArgs, "--allowedTools", "Bash"]
          })
          yield* run.send(ClaudeCli.userMessage("Sleep in the background."))
          yield* run.stdout.pipe(
            ClaudeCli.lines,
            Stream.takeUntil((line) => parse(line).type === "result"),
            Stream.runDrain
          )
          const marker = Path.basename(Path.dirname(run.cwd))
          return { marker, before: yield* ProcessTree.survivors(marker) }
        })
      )
      // The CLI and the shell running `sleep 600` were alive before the scope closed.
      expect(before.length).toBeGreaterThanOrEqual(2)
      expect(yield* ProcessTree.survivors(marker)).toEqual([])
    }))

  it.scopedLive("the real CLI retries after a 529 and a dropped stream", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.overloaded, FakeModel.dropMidStream, FakeModel.text("Third time lucky.")]
      })
      const turn = yield* ClaudeCli.runTurn({ baseUrl: model.url, prompt: "hello" })
      const messages = turn.lines.map(parse)
      const retries = messages.filter((m) => m.type === "system" && m.subtype === "api_retry")
      expect(retries).toMatchObject([{ attempt: 1, error_status: 529 }, { attempt: 2, error_status: null }])
      expect(messages.find((m) => m.type === "result")).toMatchObject({ subtype: "success", result: "Third time lucky." })
      expect((yield* model.requests).filter(FakeModel.isConversation)).toHaveLength(3)
    }))
})
