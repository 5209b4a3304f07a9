/**
 * examples/sessions.ts as a user runs it, over a config root holding a
 * compacted session with lines it does not know and lines that are broken.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as E from "../packages/store/test/fixtures/entries.js"

const repo = path.resolve(import.meta.dirname, "..")
const tsx = path.join(repo, "node_modules", ".bin", "tsx")

const run = (args: ReadonlyArray<string>) =>
  Effect.sync(() => {
    const result = ChildProcess.spawnSync(tsx, [path.join(repo, "examples", "sessions.ts"), ...args], {
      encoding: "utf8",
      env: { ...process.env, CLAUDE_CONFIG_DIR: "/nonexistent-skein-root" }
    })
    return { code: result.status, stdout: result.stdout, stderr: result.stderr }
  })

const parse = (text: string): unknown => JSON.parse(text)

describe("examples/sessions", () => {
  it.live("lists, shows and branches a session with unknown and malformed lines", () =>
    Effect.gen(function*() {
      const root = fs.mkdtempSync(path.join(os.tmpdir(), "skein-sessions-example-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(root, { recursive: true, force: true })))
      const project = path.join(root, "projects", "-work-project")
      fs.mkdirSync(project, { recursive: true })
      fs.writeFileSync(
        path.join(project, `${E.SESSION}.jsonl`),
        E.jsonl([
          E.user("u1", null, "first question"),
          E.assistant("a1", "u1", "answer one"),
          E.boundary("b1", "a1"),
          E.summary("s1", "b1", "we talked"),
          { type: "some-future-entry", sessionId: E.SESSION, payload: [1, 2, 3] },
          "{torn",
          E.user("u2", "s1", "after compaction"),
          E.assistant("a2", "u2", "answer two"),
          E.title("my session"),
          E.lastPrompt("a2", "after compaction")
        ])
      )

      const list = yield* run(["--root", root, "list", "--all", "--json"])
      expect(list.code).toBe(0)
      expect(list.stdout).toContain(E.SESSION)

      const show = yield* run(["--root", root, "show", "my session", "--json"])
      expect(show.code).toBe(0)
      const view = parse(show.stdout)
      expect(view).toMatchObject({
        sessionId: E.SESSION,
        leafUuid: "a2",
        compacted: true,
        unknownTypes: { "some-future-entry": 1 },
        messages: [
          { role: "user", content: [{ type: "text", text: "we talked\n" }, { type: "text", text: "after compaction" }] },
          { role: "assistant", content: [{ type: "text", text: "answer two" }] }
        ]
      })
      expect(JSON.stringify(view)).not.toContain("first question")
      expect(JSON.stringify(view)).toContain("Unparseable")

      const text = yield* run(["--root", root, "show", E.SESSION])
      expect(text.code).toBe(0)
      expect(text.stdout).toContain("system/compact_boundary")
      expect(text.stdout).toContain("after compaction")
      expect(text.stdout).toContain("some-future-entry ×1")

      const branch = yield* run(["--root", root, "branch", E.SESSION, "--at", "u2"])
      expect(branch.code).toBe(0)
      const id = branch.stdout.trim()
      expect(id).toMatch(/^[0-9a-f-]{36}$/)
      const shown = yield* run(["--root", root, "show", id, "--json"])
      expect(shown.code).toBe(0)
      expect(parse(shown.stdout)).toMatchObject({ sessionId: id, compacted: true })
      expect(shown.stdout).not.toContain("answer two")

      const missing = yield* run(["--root", root, "show", E.SESSION, "--at", "a1"])
      expect(missing.code).toBe(1)
      expect(missing.stderr).toContain("not in the session's effective conversation")
    }).pipe(Effect.scoped), { timeout: 60_000 })
})
