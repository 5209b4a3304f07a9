import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { folder, processesIn, skein } from "./skein.js"

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
    }), 120_000)
})

describe("skein errors: one line on stderr, nothing on stdout, a non-zero exit", () => {
  const cases: ReadonlyArray<readonly [string, ReadonlyArray<string>, RegExp]> = [
    ["an unknown option", ["run", "--bogus", "hi"], /unknown option --bogus for 'skein run'/],
    ["an unknown option before the command", ["--bogus", "sessions", "list"], /unknown option --bogus for 'skein sessions list'/],
    ["an option of another command", ["sessions", "list", "--fake-model"], /option --fake-model does not apply to 'skein sessions list'/],
    ["an unknown command", ["bogus"], /unknown command 'bogus'/],
    ["a missing subcommand", ["sessions", "--json"], /needs a command: list, show, branch, rm/],
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
      }), 60_000)
  }
})

describe("skein --help", () => {
  for (const command of [[], ["run"], ["chat"], ["sessions"], ["sessions", "list"], ["sessions", "show"], ["sessions", "branch"], ["sessions", "rm"]]) {
    it.scopedLive(`skein ${command.join(" ")} --help shows an example`, () =>
      Effect.gen(function*() {
        const cwd = yield* folder
        const ran = yield* skein([...command, "--help"], { cwd })
        expect(ran.code).toBe(0)
        expect(ran.stdout).toMatch(new RegExp(`Example: skein ${command.join(" ")}`))
      }), 60_000)
  }
})
