import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Schedule } from "effect"
import type * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { commandsIn, errorLine, folder, processesIn, skein } from "./skein.js"

interface Listed {
  readonly id: string
  readonly status: string
  readonly type: string
  readonly ownerLive: boolean
}

const listed = (stdout: string): ReadonlyArray<Listed> => {
  const parsed: unknown = JSON.parse(stdout)
  if (!Array.isArray(parsed)) return []
  return parsed.flatMap((t: unknown) =>
    typeof t === "object" && t !== null && "id" in t && "status" in t && "type" in t && "ownerLive" in t
      ? [{ id: String(t.id), status: String(t.status), type: String(t.type), ownerLive: t.ownerLive === true }]
      : []
  )
}

describe("skein tasks", () => {
  it.scopedLive("a chat's background task is listed, shown and killed from another skein; then listed as killed", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const root = Path.join(cwd, ".config")
      Fs.mkdirSync(root)
      let chatChild: ChildProcess.ChildProcess | undefined
      // The full CLI: --bare's Bash has no run_in_background.
      const chat = yield* skein(["chat", "--fake-model", "--full-cli", "--root", root, "--allow", "Bash"], {
        cwd,
        stdin: "$& sleep 300\n",
        keepStdin: true,
        onSpawn: (child) => {
          chatChild = child
        }
      }).pipe(Effect.fork)

      const running = yield* skein(["tasks", "list", "--running", "--json", "--root", root], { cwd }).pipe(
        Effect.map((ran) => listed(ran.stdout)),
        Effect.filterOrFail((tasks) => tasks.length === 1),
        Effect.retry(Schedule.spaced("1 second").pipe(Schedule.upTo("120 seconds")))
      )
      const task = running[0]!
      expect(task).toMatchObject({ status: "running", type: "local_bash", ownerLive: true })

      const shown = yield* skein(["tasks", "show", task.id, "--root", root], { cwd })
      expect(shown.code).toBe(0)
      expect(shown.stdout).toContain("Run it in the background")

      const killed = yield* skein(["--root", root, "tasks", "kill", task.id], { cwd })
      expect(killed.stderr).toBe("")
      expect(killed.code).toBe(0)
      expect(killed.stdout.trim()).toBe(`${task.id} killed`)

      const after = yield* skein(["tasks", "list", "--json", "--root", root], { cwd })
      expect(listed(after.stdout).find((t) => t.id === task.id)?.status).toBe("killed")
      // The CLI stopped it: no `sleep 300` is left while the chat goes on.
      yield* Effect.sync(() => commandsIn(cwd).filter((c) => c.includes("sleep 300"))).pipe(
        Effect.filterOrFail((left) => left.length === 0),
        Effect.retry(Schedule.spaced("500 millis").pipe(Schedule.upTo("20 seconds")))
      )
      expect(chatChild?.exitCode).toBeNull()
      chatChild?.stdin?.end()
      const ended = yield* Fiber.join(chat)
      expect(ended.code).toBe(0)

      const again = yield* skein(["tasks", "kill", task.id, "--root", root], { cwd })
      expect(errorLine(again)).toMatch(new RegExp(`task ${task.id} has already ended \\(killed\\)`))
      expect(processesIn(cwd)).toEqual([])
    }), 300_000)

  it.scopedLive("errors: not a task id, no such task; a list with none", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const notId = yield* skein(["tasks", "show", "nope", "--root", cwd], { cwd })
      expect(errorLine(notId)).toMatch(/"nope" is not a task id/)
      const missing = yield* skein(["tasks", "kill", "b00000000", "--root", cwd], { cwd })
      expect(errorLine(missing)).toMatch(/no task b00000000 under /)
      // The start of a task id is looked up like a whole one.
      expect(errorLine(yield* skein(["tasks", "show", "b0000", "--root", cwd], { cwd }))).toMatch(/no task b0000 under /)
      const none = yield* skein(["tasks", "list", "--root", cwd], { cwd })
      expect(none.stdout.trim()).toBe("no tasks")
      const json = yield* skein(["tasks", "list", "--root", cwd, "--json"], { cwd })
      expect(JSON.parse(json.stdout)).toEqual([])
    }), 180_000)
})
