import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as E from "../../store/test/fixtures/entries.js"
import { errorLine, folder, processesIn, skein } from "./skein.js"

const sessionIds = (stdout: string): ReadonlyArray<string> => {
  const parsed: unknown = JSON.parse(stdout)
  if (!Array.isArray(parsed)) return []
  return parsed.flatMap((s: unknown) => typeof s === "object" && s !== null && "sessionId" in s && typeof s.sessionId === "string" ? [s.sessionId] : [])
}

describe("skein sessions", () => {
  it.scopedLive("list (either option order), show --full, resume, branch, rm over a config root", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const root = Path.join(cwd, ".config")
      Fs.mkdirSync(root)
      const first = yield* skein(["run", "--fake-model", "--root", root, "hi"], { cwd })
      expect(first.code).toBe(0)

      const after = yield* skein(["sessions", "list", "--root", root, "--json"], { cwd })
      const before = yield* skein(["--root", root, "--json", "sessions", "list"], { cwd })
      expect(after.code).toBe(0)
      expect(before.code).toBe(0)
      const ids = sessionIds(after.stdout)
      expect(ids).toHaveLength(1)
      expect(sessionIds(before.stdout)).toEqual(ids)
      const id = ids[0]!
      const plain = yield* skein(["sessions", "--root", root, "list"], { cwd })
      expect(plain.stdout).toContain(id)

      const full = yield* skein(["sessions", "show", id, "--full", "--root", root], { cwd })
      expect(full.code).toBe(0)
      expect(full.stdout).toContain("Hello! I'm skein's fake model. Everything is working, and I'm happy to help with whatever you need.")

      const resumed = yield* skein(["run", "--fake-model", "--root", root, "--resume", id, "again"], { cwd })
      expect(resumed.code).toBe(0)
      const shown = yield* skein(["sessions", "show", id, "--json", "--root", root], { cwd })
      expect(shown.stdout).toContain("again")

      const view: unknown = JSON.parse(shown.stdout)
      const entries = typeof view === "object" && view !== null && "entries" in view && Array.isArray(view.entries) ? view.entries : []
      // Branch at the first prompt: the new session holds "hi" and not "again".
      const at = entries.flatMap((e: unknown) =>
        typeof e === "object" && e !== null && "uuid" in e && "type" in e && e.type === "user" ? [String(e.uuid)] : []
      )[0]
      expect(at).toBeDefined()
      const branched = yield* skein(["sessions", "branch", id, "--at", at!, "--root", root], { cwd })
      expect(branched.stderr).toBe("")
      expect(branched.code).toBe(0)
      expect(branched.stdout.trim()).toMatch(/^[0-9a-f-]{36}$/)
      const child = yield* skein(["sessions", "show", branched.stdout.trim(), "--root", root], { cwd })
      expect(child.stdout).toMatch(/user\s+hi$/m)
      expect(child.stdout).not.toContain("again")

      const removed = yield* skein(["sessions", "rm", id, "--root", root], { cwd })
      expect(removed.code).toBe(0)
      expect(removed.stdout).toContain(`removed ${id}`)
      const left = yield* skein(["sessions", "list", "--json", "--root", root], { cwd })
      expect(sessionIds(left.stdout)).not.toContain(id)
      expect(processesIn(cwd)).toEqual([])
    }), 400_000)
})

describe("skein sessions resume", () => {
  it.scopedLive("chats on in a stored session, in the folder it ran in, from anywhere", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const root = Path.join(cwd, ".config")
      const elsewhere = Path.join(cwd, "elsewhere")
      Fs.mkdirSync(root)
      Fs.mkdirSync(elsewhere)
      expect((yield* skein(["run", "--fake-model", "--root", root, "hi"], { cwd })).code).toBe(0)
      const id = sessionIds((yield* skein(["sessions", "list", "--json", "--root", root], { cwd })).stdout)[0]!
      const resumed = yield* skein(["sessions", "resume", id, "--fake-model", "--root", root], { cwd: elsewhere, stdin: "again\n" })
      expect(resumed.code).toBe(0)
      expect(resumed.stdout).toContain("Hello! I'm skein's fake model.")
      const shown = yield* skein(["sessions", "show", id, "--root", root], { cwd })
      expect(shown.stdout).toMatch(/user\s+hi$/m)
      expect(shown.stdout).toMatch(/user\s+again$/m)
      const missing = yield* skein(["sessions", "resume", "no-such-session", "--root", root], { cwd })
      expect(errorLine(missing)).toMatch(/no session matches "no-such-session"/)
      expect(processesIn(cwd)).toEqual([])
    }), 240_000)
})

describe("skein sessions show: unknown and malformed lines", () => {
  it.scopedLive("lists, shows (text and JSON) and branches a compacted session with lines it does not know and broken ones", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const project = Path.join(cwd, "projects", "-work-project")
      Fs.mkdirSync(project, { recursive: true })
      Fs.writeFileSync(
        Path.join(project, `${E.SESSION}.jsonl`),
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
      const env = { CLAUDE_CONFIG_DIR: "/nonexistent-skein-root" }
      const list = yield* skein(["--root", cwd, "sessions", "list", "--all", "--json"], { cwd, env })
      expect(list.code).toBe(0)
      expect(sessionIds(list.stdout)).toEqual([E.SESSION])

      const show = yield* skein(["sessions", "show", "my session", "--json", "--root", cwd], { cwd, env })
      expect(show.code).toBe(0)
      const view: unknown = JSON.parse(show.stdout)
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
      expect(show.stdout).not.toContain("first question")
      expect(show.stdout).toContain("Unparseable")

      const text = yield* skein(["sessions", "show", E.SESSION, "--root", cwd], { cwd, env })
      expect(text.code).toBe(0)
      expect(text.stdout).toContain("system/compact_boundary")
      expect(text.stdout).toContain("after compaction")
      expect(text.stdout).toContain("some-future-entry ×1")
      expect(text.stdout).toMatch(/^note: line \d+ \(from the boundary\): not JSON/m)

      const branch = yield* skein(["sessions", "branch", E.SESSION, "--at", "u2", "--root", cwd], { cwd, env })
      expect(branch.code).toBe(0)
      const id = branch.stdout.trim()
      expect(id).toMatch(/^[0-9a-f-]{36}$/)
      const shown = yield* skein(["sessions", "show", id, "--json", "--root", cwd], { cwd, env })
      expect(JSON.parse(shown.stdout)).toMatchObject({ sessionId: id, compacted: true })
      expect(shown.stdout).not.toContain("answer two")

      const outside = yield* skein(["sessions", "show", E.SESSION, "--at", "a1", "--root", cwd], { cwd, env })
      expect(errorLine(outside)).toMatch(/message a1 is not in the session's effective conversation/)
    }), 240_000)
})

describe("skein errors: one line on stderr, nothing on stdout, a non-zero exit", () => {
  const cases: ReadonlyArray<readonly [string, ReadonlyArray<string>, RegExp]> = [
    ["an unknown option", ["run", "--bogus", "hi"], /unknown option --bogus for 'skein run'/],
    ["an unknown option before the command", ["--bogus", "sessions", "list"], /unknown option --bogus for 'skein sessions list'/],
    ["an option of another command", ["sessions", "list", "--fake-model"], /option --fake-model does not apply to 'skein sessions list'/],
    ["an unknown command", ["bogus"], /unknown command 'bogus'/],
    ["a missing subcommand", ["sessions", "--json"], /needs a command: list, show, branch, resume, rm/],
    ["a missing tasks subcommand", ["tasks"], /needs a command: list, show, kill/],
    ["a missing memory subcommand", ["memory", "--json"], /needs a command: list, add, repair/],
    ["an option of another command, before it", ["--port", "1", "compact", "x"], /option --port does not apply to 'skein compact'/],
    ["a choice not offered", ["compact", "x", "--pass", "bogus"], /memory|summarize/],
    ["a missing session to compact", ["compact", "no-such-session", "--root", "."], /no session matches "no-such-session"/],
    ["a missing prompt", ["run", "--fake-model"], /Missing argument <prompt>/],
    ["a missing session", ["sessions", "show", "no-such-session", "--root", "."], /no session matches "no-such-session"/],
    ["a missing session to remove", ["sessions", "rm", "no-such-session", "--root", "."], /no session matches "no-such-session"/],
    ["a session to resume that is not there", ["run", "--fake-model", "--resume", "no-such-session", "hi"], /no session no-such-session to resume/],
    ["no CLI at the given path", ["run", "--claude", "/nonexistent/claude", "hi"], /could not start \/nonexistent\/claude/]
  ]
  for (const [name, args, message] of cases) {
    it.scopedLive(name, () =>
      Effect.gen(function*() {
        const cwd = yield* folder
        const ran = yield* skein(args, { cwd })
        expect(ran.code).not.toBe(0)
        expect(ran.stdout).toBe("")
        const lines = ran.stderr.split("\n").filter((line) => line.length > 0)
        expect(lines).toHaveLength(1)
        expect(lines[0]).toMatch(/^skein: /)
        expect(lines[0]).toMatch(message)
        expect(processesIn(cwd)).toEqual([])
      }), 120_000)
  }
})
