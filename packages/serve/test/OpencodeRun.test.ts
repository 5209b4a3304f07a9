import { describe, expect, it } from "@effect/vitest"
import { FakeModel, Opencode } from "@skein/testkit"
import { Effect } from "effect"
import * as Harness from "./harness.js"

describe("opencode run --attach against skein serve (real CLI, FakeModel)", () => {
  it.scopedLive("completes a turn and prints the model's text on the first run", () =>
    Effect.gen(function*() {
      const reply = "Hello from Claude Code, served by skein."
      const model = yield* FakeModel.make({ replies: [FakeModel.text(reply)] })
      const server = yield* Harness.start(model)
      const { env } = Opencode.offline({ root: server.dirs.root, cwd: server.dirs.cwd, modelUrl: model.url, password: Harness.token })
      const exited = yield* Opencode.run(["run", "--attach", server.url, "Say hello"], { cwd: server.dirs.cwd, env }).pipe(
        Effect.timeoutFail({ duration: "90 seconds", onTimeout: () => new Error("opencode run did not exit") })
      )
      expect(exited.stderr).not.toMatch(/error/i)
      expect(exited.code).toBe(0)
      expect(exited.stdout).toContain(reply)
    }), { timeout: 120_000 })
})
