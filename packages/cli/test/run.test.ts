import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { folder, processesIn, skein } from "./skein.js"

const greeting = "Hello! I'm skein's fake model."

describe("skein run", () => {
  it.scopedLive("prints the streamed text of one real-CLI turn and leaves no process", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const ran = yield* skein(["run", "hi", "--fake-model"], { cwd })
      expect(ran.stderr).toContain("done")
      expect(ran.code).toBe(0)
      expect(ran.stdout).toContain(greeting)
      expect(processesIn(cwd)).toEqual([])
    }), 180_000)

  it.scopedLive("--json prints canonical events, one JSON object a line", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const ran = yield* skein(["run", "--json", "--fake-model", "hi"], { cwd })
      expect(ran.code).toBe(0)
      const events = ran.stdout.trim().split("\n").map((line): unknown => JSON.parse(line))
      const types = events.map((e) => typeof e === "object" && e !== null && "type" in e ? e.type : undefined)
      expect(types).toContain("message.part.updated")
      expect(types).toContain("session.idle")
      expect(ran.stdout).toContain(greeting)
      expect(processesIn(cwd)).toEqual([])
    }), 180_000)

  it.scopedLive("--allow and --deny decide the CLI's permission requests", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const denied = yield* skein(["run", "--fake-model", "$ touch made.txt"], { cwd })
      expect(denied.code).toBe(0)
      expect(denied.stdout).toContain("→ Bash(command=\"touch made.txt\"")
      expect(denied.stderr).toContain("✗ Bash denied")
      expect(Fs.existsSync(Path.join(cwd, "made.txt"))).toBe(false)
      const explicit = yield* skein(["run", "--fake-model", "--deny", "Bash", "$ touch made.txt"], { cwd })
      expect(explicit.stderr).toContain("✗ Bash denied: --deny")
      expect(Fs.existsSync(Path.join(cwd, "made.txt"))).toBe(false)
      const allowed = yield* skein(["run", "--fake-model", "$ touch made.txt", "--allow", "Read,Bash"], { cwd })
      expect(allowed.code).toBe(0)
      expect(allowed.stderr).toContain("✓ Bash allowed")
      expect(Fs.existsSync(Path.join(cwd, "made.txt"))).toBe(true)
      expect(processesIn(cwd)).toEqual([])
    }), 300_000)

  it.scopedLive("Ctrl-C interrupts a streaming turn: exit 130, no process left", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      let sent = false
      const ran = yield* skein(["run", "--fake-model", "tell me everything [slow]"], {
        cwd,
        onStdout: (child, stdout) => {
          if (!sent && stdout.includes("Part 2:")) {
            sent = true
            child.kill("SIGINT")
          }
        }
      })
      expect(sent).toBe(true)
      expect(ran.code).toBe(130)
      expect(ran.stderr).toContain("interrupted")
      expect(ran.stdout).not.toContain("Part 40:")
      expect(processesIn(cwd)).toEqual([])
    }), 180_000)
})

describe("skein chat", () => {
  it.scopedLive("runs a turn per line of stdin, in one session", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const ran = yield* skein(["chat", "--fake-model", "--allow", "Bash"], { cwd, stdin: "hi\n\n$ touch chat.txt\n" })
      expect(ran.code).toBe(0)
      expect(ran.stdout).toContain(greeting)
      expect(ran.stdout).toContain("The command printed")
      expect(Fs.existsSync(Path.join(cwd, "chat.txt"))).toBe(true)
      expect(ran.stderr.match(/^done/gm)?.length).toBe(2)
      expect(processesIn(cwd)).toEqual([])
    }), 180_000)

  it.scopedLive("Ctrl-C between turns quits: exit 130, no process left", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      let sent = false
      const ran = yield* skein(["chat", "--fake-model"], {
        cwd,
        stdin: "hi\n",
        keepStdin: true,
        onStderr: (child, stderr) => {
          if (!sent && stderr.includes("done")) {
            sent = true
            child.kill("SIGINT")
          }
        }
      })
      expect(sent).toBe(true)
      expect(ran.code).toBe(130)
      expect(ran.stdout).toContain(greeting)
      expect(processesIn(cwd)).toEqual([])
    }), 180_000)
})
