/**
 * Issue 25, "The skein command": the session id at the end of `run`, ids by
 * their first 8 characters, skein's own sessions hidden from `sessions list`,
 * and a `--root` that does not exist.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { errorLine, folder, processesIn, skein } from "./skein.js"

const uuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/

const listIds = (root: string, cwd: string, all = false) =>
  Effect.map(skein(["sessions", "list", "--json", "--root", root, ...(all ? ["--all"] : [])], { cwd }), (ran) => {
    const listed: ReadonlyArray<{ readonly sessionId: string }> = JSON.parse(ran.stdout)
    return listed.map((s) => s.sessionId)
  })

describe("skein command", () => {
  it.scopedLive("run prints the session id at the end, and --json ends with a skein.session line", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const root = Path.join(cwd, ".config")
      Fs.mkdirSync(root)
      const ran = yield* skein(["run", "--fake-model", "--root", root, "hi"], { cwd })
      expect(ran.code).toBe(0)
      const last = ran.stderr.trim().split("\n").at(-1) ?? ""
      expect(last).toMatch(new RegExp(`^session ${uuid.source}$`))
      expect(yield* listIds(root, cwd)).toEqual([last.slice("session ".length)])

      const json = yield* skein(["run", "--fake-model", "--json", "--root", root, "--continue", "again"], { cwd })
      expect(json.code).toBe(0)
      const final: { readonly type: string; readonly properties: { readonly sessionId: string } } = JSON.parse(json.stdout.trim().split("\n").at(-1) ?? "{}")
      expect(final.type).toBe("skein.session")
      expect(final.properties.sessionId).toMatch(uuid)
      expect(processesIn(cwd)).toEqual([])
    }), 180_000)

  it.scopedLive("every command taking an id accepts its first 8 characters, sessions branch --at included", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const root = Path.join(cwd, ".config")
      Fs.mkdirSync(root)
      expect((yield* skein(["run", "--fake-model", "--root", root, "hi"], { cwd })).code).toBe(0)
      const [id] = yield* listIds(root, cwd)
      const short = (id ?? "").slice(0, 8)

      const shown = yield* skein(["sessions", "show", short, "--root", root], { cwd })
      expect(shown.code).toBe(0)
      expect(shown.stdout.split("\n")[0]).toBe(id)
      // show prints each message's first 8 characters; branch takes them.
      const assistant = shown.stdout.split("\n").find((line) => /^[0-9a-f]{8}  assistant /.test(line)) ?? ""
      const branched = yield* skein(["sessions", "branch", short, "--at", assistant.slice(0, 8), "--root", root], { cwd })
      expect(branched.stderr).toBe("")
      expect(branched.stdout.trim()).toMatch(uuid)
      const shownAt = yield* skein(["sessions", "show", short, "--at", assistant.slice(0, 8), "--root", root], { cwd })
      expect(shownAt.code).toBe(0)

      const resumed = yield* skein(["run", "--fake-model", "--root", root, "--resume", short, "again"], { cwd })
      expect(resumed.code).toBe(0)
      expect(resumed.stderr.trim().split("\n").at(-1)).toBe(`session ${id}`)

      const removed = yield* skein(["sessions", "rm", short, "--root", root], { cwd })
      expect(removed.stdout.trim()).toBe(`removed ${id}`)
      expect(errorLine(yield* skein(["sessions", "show", "0000", "--root", root], { cwd }))).toMatch(/no session matches "0000"/)
      expect(processesIn(cwd)).toEqual([])
    }), 240_000)

  it.scopedLive("sessions list hides skein's own memory-job and worker sessions without --all", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const root = Path.join(cwd, ".config")
      Fs.mkdirSync(root)
      expect((yield* skein(["run", "--fake-model", "--root", root, "hi"], { cwd })).code).toBe(0)
      const mine = yield* listIds(root, cwd)
      expect(mine.length).toBe(1)
      const added = yield* skein(["memory", "add", "--fact", "we deploy on Tuesdays only", "--fake-model", "--root", root, "--cwd", cwd], { cwd })
      expect(added.code).toBe(0)
      expect(yield* listIds(root, cwd)).toEqual(mine)
      // --all shows them: the memory job's session and its extraction worker.
      expect((yield* listIds(root, cwd, true)).length).toBe(3)
      expect(processesIn(cwd)).toEqual([])
    }), 240_000)

  it.scopedLive("a --root that does not exist is an error for reading commands, and run does not create it", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const missing = Path.join(cwd, "nonexistent")
      for (const args of [["sessions", "list"], ["tasks", "list"], ["memory", "list"], ["sessions", "show", "abcd1234"], ["compact", "abcd1234"]]) {
        expect(errorLine(yield* skein([...args, "--root", missing], { cwd }))).toBe(
          `skein: no config folder at ${missing} (--root must name an existing folder)`
        )
      }
      expect(errorLine(yield* skein(["run", "--fake-model", "--root", missing, "hi"], { cwd }))).toMatch(/no config folder at/)
      expect(Fs.existsSync(missing)).toBe(false)
    }), 120_000)
})
