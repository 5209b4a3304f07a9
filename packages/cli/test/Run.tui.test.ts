/**
 * `skein run` on a real terminal: tmux on a private socket, keys sent to the
 * pane, the screen read back. Only this test's tmux server is ever killed.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { folder } from "./skein.js"
import { nothingLeft, terminal, waitFor } from "./terminal.js"

describe("skein run on a terminal", () => {
  it.scopedLive("asks permission on the terminal: y allows once (the tool runs, the model sees its result), n denies", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const allowed = yield* terminal(cwd, ["run", "--fake-model", "$ touch made.txt"])
      yield* waitFor(allowed, /\? Bash wants to run with command="touch made\.txt"[\s\S]*\[y\] allow once +\[a\] allow Bash always +\[n\] deny/)
      expect(Fs.existsSync(Path.join(cwd, "made.txt"))).toBe(false)
      allowed.keys("y")
      const done = yield* waitFor(allowed, /\[exit \d+\]/)
      expect(done).toContain("[exit 0]")
      expect(done).toContain("✓ Bash allowed (once)")
      // FakeModel answers this only to a tool_result: the tool ran and its result went back to the model.
      expect(done).toContain("The command printed:")
      expect(Fs.existsSync(Path.join(cwd, "made.txt"))).toBe(true)
      // The spinner erased itself.
      expect(done).not.toContain("thinking…")
      expect(yield* nothingLeft(allowed, cwd)).toEqual([])

      const denied = yield* terminal(cwd, ["run", "--fake-model", "$ touch denied.txt"])
      yield* waitFor(denied, /\[n\] deny/)
      denied.keys("n")
      const after = yield* waitFor(denied, /\[exit \d+\]/)
      expect(after).toContain("✗ Bash denied: at the prompt")
      expect(after).toContain("The command was not run")
      expect(Fs.existsSync(Path.join(cwd, "denied.txt"))).toBe(false)
      expect(yield* nothingLeft(denied, cwd)).toEqual([])
    }), 300_000)

  it.scopedLive("skein chat on a terminal: a allows the tool always, so the next call runs without asking; Ctrl-D ends it", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const t = yield* terminal(cwd, ["chat", "--fake-model"])
      yield* waitFor(t, /^>/m)
      t.keys("$ touch first.txt", "Enter")
      yield* waitFor(t, /\[n\] deny/)
      t.keys("a")
      yield* waitFor(t, /✓ Bash allowed \(always\)[\s\S]*The command printed:[\s\S]*\n> ?$/m)
      expect(Fs.existsSync(Path.join(cwd, "first.txt"))).toBe(true)
      t.keys("$ touch second.txt", "Enter")
      const second = yield* waitFor(t, /touch second\.txt[\s\S]*The command printed:[\s\S]*\n> ?$/m)
      expect(second.match(/wants to run/g)?.length).toBe(1)
      expect(Fs.existsSync(Path.join(cwd, "second.txt"))).toBe(true)
      t.keys("C-d")
      expect(yield* waitFor(t, /\[exit \d+\]/)).toContain("[exit 0]")
      expect(yield* nothingLeft(t, cwd)).toEqual([])
    }), 300_000)

  it.scopedLive("Ctrl-C interrupts a streaming turn: exit 130, the stream stops, no process left", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const t = yield* terminal(cwd, ["run", "--fake-model", "tell me everything [slow]"])
      yield* waitFor(t, /Part 2:/)
      t.keys("C-c")
      const done = yield* waitFor(t, /\[exit \d+\]/)
      expect(done).toContain("[exit 130]")
      expect(done).toContain("interrupted")
      expect(done).not.toContain("Part 40:")
      expect(yield* nothingLeft(t, cwd)).toEqual([])
    }), 300_000)
})
