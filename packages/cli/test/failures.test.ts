/**
 * Issue 25, "Failures reported as success": the commands run the real CLI
 * as a person without a login would (no API key; FakeModel on 127.0.0.1
 * stands where the API would be, and is never called). Each must say the
 * CLI's own reason in one line and exit non-zero, never "success".
 */
import { describe, expect, it } from "@effect/vitest"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { folder, processesIn, type Ran, skein } from "./skein.js"

/** A person's environment with no login: the CLI pointed at FakeModel, no key, its config in `root`. */
const noLogin = (model: FakeModel.FakeModel["Type"], root: string, tmpDir: string) => ({
  ...ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: root, tmpDir }),
  ANTHROPIC_API_KEY: undefined
})

const stderrLines = (ran: Ran) => ran.stderr.split("\n").filter((line) => line.length > 0)

const setup = Effect.gen(function*() {
  const cwd = yield* folder
  const root = Path.join(cwd, ".config")
  const tmp = Path.join(cwd, ".tmp")
  Fs.mkdirSync(root)
  Fs.mkdirSync(tmp)
  const model = yield* FakeModel.make({ replies: [] })
  return { cwd, root, model, env: noLogin(model, root, tmp) }
})

describe("failures reported as failures", () => {
  it.scopedLive("skein run without a login prints the CLI's reason in one line, not 'failed (success)'", () =>
    Effect.gen(function*() {
      const { cwd, env, model, root } = yield* setup
      const ran = yield* skein(["run", "say hi", "--root", root], { cwd, env })
      expect(ran.code).toBe(1)
      // Not model text: stdout has none of it.
      expect(ran.stdout).toBe("")
      const lines = stderrLines(ran)
      expect(lines.at(-1)).toBe("skein: Not logged in · Please run /login")
      expect(ran.stderr).not.toContain("(success)")
      expect(lines[0]).toMatch(/^failed \(authentication_failed\) · /)
      expect((yield* model.requests).filter(FakeModel.isConversation)).toEqual([])
      expect(processesIn(cwd)).toEqual([])
    }), 120_000)

  it.scopedLive("skein compact --pass summarize without a login says the summarizing turn failed and why", () =>
    Effect.gen(function*() {
      const { cwd, env, root } = yield* setup
      expect((yield* skein(["run", "--fake-model", "--root", root, "hi"], { cwd })).code).toBe(0)
      const listed: ReadonlyArray<{ readonly sessionId: string }> = JSON.parse((yield* skein(["sessions", "list", "--json", "--root", root], { cwd })).stdout)
      const id = listed[0]?.sessionId ?? ""
      const ran = yield* skein(["compact", id, "--pass", "summarize", "--keep-tokens", "0", "--keep-messages", "1", "--root", root], { cwd, env })
      expect(ran.code).toBe(1)
      expect(stderrLines(ran)).toEqual(["skein: the summarizing turn failed: Not logged in · Please run /login"])
      expect(processesIn(cwd)).toEqual([])
    }), 180_000)

  it.scopedLive("skein memory add --fact and skein dream without a login fail with the CLI's reason, and write nothing", () =>
    Effect.gen(function*() {
      const { cwd, env, root } = yield* setup
      const project = Path.join(cwd, "project")
      Fs.mkdirSync(project)
      const added = yield* skein(["memory", "add", "--fact", "we deploy on Tuesdays only", "--root", root, "--cwd", project], { cwd, env })
      expect(added.code).toBe(1)
      expect(added.stdout).not.toContain("wrote")
      expect(stderrLines(added)).toEqual(["skein: Not logged in · Please run /login"])
      const dreamt = yield* skein(["dream", "--root", root, "--cwd", project], { cwd, env })
      expect(dreamt.code).toBe(1)
      expect(dreamt.stdout).not.toContain("completed")
      expect(stderrLines(dreamt)).toEqual(["skein: Not logged in · Please run /login"])
      const memory = Fs.readdirSync(Path.join(root, "projects")).map((p) => Path.join(root, "projects", p, "memory"))
      expect(memory.filter((dir) => Fs.existsSync(Path.join(dir, "MEMORY.md")))).toEqual([])
      expect(processesIn(cwd)).toEqual([])
    }), 180_000)
})
