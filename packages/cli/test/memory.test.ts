import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { errorLine, folder, processesIn, skein } from "./skein.js"

describe("skein memory and skein dream", () => {
  it.scopedLive("list an empty folder, add a fact through the extraction worker, list it, dream over it, repair", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const root = Path.join(cwd, ".config")
      const project = Path.join(cwd, "project")
      Fs.mkdirSync(root)
      Fs.mkdirSync(project)
      const empty = yield* skein(["memory", "list", "--root", root, "--cwd", project], { cwd })
      expect(empty.code).toBe(0)
      expect(empty.stdout).toMatch(/memory: 0 memories, MEMORY\.md 0 bytes/)

      const added = yield* skein(["memory", "add", "--fact", "we deploy on Tuesdays only", "--fake-model", "--root", root, "--cwd", project], { cwd })
      expect(added.stderr).toBe("")
      expect(added.code).toBe(0)
      expect(added.stdout).toContain("extraction: wrote")
      const listed = yield* skein(["--root", root, "--cwd", project, "--json", "memory", "list"], { cwd })
      expect(JSON.parse(listed.stdout)).toMatchObject({
        memories: [{ file: "we-deploy-on-tuesdays-only.md", type: "project", description: "we deploy on Tuesdays only" }],
        problems: []
      })

      const dreamt = yield* skein(["dream", "--fake-model", "--root", root, "--cwd", project], { cwd })
      expect(dreamt.stderr).toBe("")
      expect(dreamt.code).toBe(0)
      expect(dreamt.stdout).toMatch(/^dream d[0-9a-z]{8} completed: \{"_tag":"Consolidated"/m)

      // An index line for a file that is gone: repair drops it.
      const index = Fs.readdirSync(Path.join(root, "projects")).map((p) => Path.join(root, "projects", p, "memory", "MEMORY.md"))[0]!
      Fs.appendFileSync(index, "- [Gone](gone.md) — a memory that was removed\n")
      const dangling = yield* skein(["memory", "list", "--root", root, "--cwd", project], { cwd })
      expect(dangling.stdout).toMatch(/! MEMORY\.md line 2: gone\.md does not exist/)
      const repaired = yield* skein(["memory", "repair", "--root", root, "--cwd", project], { cwd })
      expect(repaired.stdout).toMatch(/^fixed 1, left 0$/m)
      expect(processesIn(cwd)).toEqual([])
    }), 480_000)

  it.scopedLive("errors: add without a fact, an unknown memory command", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      expect(errorLine(yield* skein(["memory", "add", "--root", cwd], { cwd }))).toMatch(/--fact/)
      expect(errorLine(yield* skein(["memory", "forget"], { cwd }))).toMatch(/unknown command 'forget' for 'skein memory' \(expected list, add, repair\)/)
    }), 120_000)
})
