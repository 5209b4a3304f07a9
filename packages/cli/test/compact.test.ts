import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { errorLine, folder, processesIn, skein } from "./skein.js"

describe("skein compact", () => {
  it.scopedLive("pass memory from summary.md (declines first without one, then with a window that keeps all), then pass summarize through the fake model", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const root = Path.join(cwd, ".config")
      Fs.mkdirSync(root)
      expect((yield* skein(["run", "--fake-model", "--root", root, "hi"], { cwd })).code).toBe(0)
      expect((yield* skein(["run", "--fake-model", "--root", root, "--continue", "again"], { cwd })).code).toBe(0)
      const listed: unknown = JSON.parse((yield* skein(["sessions", "list", "--json", "--root", root], { cwd })).stdout)
      const [id, transcript] = Array.isArray(listed) && typeof listed[0] === "object" && listed[0] !== null && "sessionId" in listed[0] &&
          "path" in listed[0]
        ? [String(listed[0].sessionId), String(listed[0].path)]
        : ["", ""]
      expect(id).not.toBe("")

      const noSummary = yield* skein(["compact", id, "--root", root], { cwd })
      expect(errorLine(noSummary)).toMatch(/no session memory at .*summary\.md \(try --pass summarize\)/)

      const memory = Path.join(Path.dirname(transcript), id, "session-memory")
      Fs.mkdirSync(memory, { recursive: true })
      Fs.writeFileSync(Path.join(memory, "summary.md"), "# Session\nThe person said hi, twice.\n")
      const keepsAll = yield* skein(["compact", id, "--root", root], { cwd })
      expect(errorLine(keepsAll)).toMatch(/would keep every message; lower --keep-tokens/)

      const compacted = yield* skein(["compact", id, "--keep-tokens", "0", "--keep-messages", "1", "--json", "--root", root], { cwd })
      expect(compacted.code).toBe(0)
      expect(JSON.parse(compacted.stdout)).toMatchObject({ _tag: "Compacted", pass: "memory", sessionId: id })
      const shown = yield* skein(["sessions", "show", id, "--full", "--root", root], { cwd })
      expect(shown.stdout).toContain("system/compact_boundary")
      expect(shown.stdout).toContain("The person said hi, twice.")
      expect(shown.stdout).not.toMatch(/user\s+hi$/m)

      const summarized = yield* skein(["--pass", "summarize", "--fake-model", "compact", id, "--keep-tokens", "0", "--keep-messages", "1", "--root", root], { cwd })
      expect(summarized.stderr).toBe("")
      expect(summarized.stdout).toMatch(new RegExp(`^compacted ${id} \\(summarize\\): \\d+ -> \\d+ tokens`))
      const resumedView = yield* skein(["sessions", "show", id, "--full", "--root", root], { cwd })
      expect(resumedView.stdout).toContain("The person greeted the fake model")
      // The summarizing fork left no session of its own behind.
      const after: unknown = JSON.parse((yield* skein(["sessions", "list", "--json", "--root", root], { cwd })).stdout)
      expect(Array.isArray(after) ? after.length : -1).toBe(1)
      expect(processesIn(cwd)).toEqual([])
    }), 480_000)
})
