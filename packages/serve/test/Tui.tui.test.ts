/**
 * opencode's TUI (`opencode attach <url>`) against skein serve, under tmux on
 * a private socket: a typed prompt gets the model's reply, streamed by the
 * real CLI from FakeModel, on the screen.
 */
import { describe, expect, it } from "@effect/vitest"
import { FakeModel, Opencode } from "@skein/testkit"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Harness from "./harness.js"

const tmux = (socket: string, args: ReadonlyArray<string>) => ChildProcess.execFileSync("tmux", ["-L", socket, ...args], { encoding: "utf8" })

/** Polls the pane until `found` holds, for at most `tries` × 250 ms. */
const waitForPane = (socket: string, found: (pane: string) => boolean, tries: number) =>
  Effect.gen(function*() {
    let pane = ""
    for (let i = 0; i < tries; i++) {
      pane = tmux(socket, ["capture-pane", "-p", "-t", "tui"])
      if (found(pane)) return pane
      yield* Effect.sleep("250 millis")
    }
    return pane
  })

describe("opencode attach (the TUI) against skein serve", () => {
  it.scopedLive("a typed prompt shows the streamed reply", () =>
    Effect.gen(function*() {
      const reply = "Streamed to the opencode TUI by skein."
      const model = yield* FakeModel.make({ replies: [FakeModel.text(reply)] })
      const server = yield* Harness.start(model)
      const { env } = Opencode.offline({ root: server.dirs.root, cwd: server.dirs.cwd, modelUrl: model.url, password: Harness.token })
      const socket = `skein-tui-${process.pid}-${Date.now()}`
      yield* Effect.acquireRelease(
        Effect.sync(() =>
          tmux(socket, [
            "new-session", "-d", "-s", "tui", "-x", "160", "-y", "45", "-c", server.dirs.cwd,
            ...Object.entries(env).flatMap(([k, v]) => ["-e", `${k}=${v}`]),
            Opencode.binary, "attach", server.url
          ])
        ),
        // Only this test's tmux server, on its own socket.
        () => Effect.sync(() => tmux(socket, ["kill-server"]))
      )
      const ready = yield* waitForPane(socket, (pane) => /ctrl\+p|tab|agents?|build/i.test(pane), 120)
      expect(ready).toMatch(/ctrl\+p|tab|agents?|build/i)
      tmux(socket, ["send-keys", "-t", "tui", "-l", "Say hello"])
      tmux(socket, ["send-keys", "-t", "tui", "Enter"])
      const pane = yield* waitForPane(socket, (p) => p.includes(reply), 240)
      expect(pane).toContain(reply)
    }), { timeout: 120_000 })
})
