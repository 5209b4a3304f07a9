/**
 * FakeModel in a process of its own (`fakeModelServer.ts`), as a scoped
 * resource: its URL, and the process ended when the scope closes. A bench
 * that measures the host's CPU serves the model from here, so the model's
 * own work never lands in the host's window.
 */
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import * as Readline from "node:readline"

export const modelProcess = Effect.acquireRelease(
  Effect.async<{ readonly url: string; readonly child: ChildProcess.ChildProcess }>((resume) => {
    const tsx = Path.resolve(import.meta.dirname, "../../node_modules/.bin/tsx")
    // The same package conditions as this process (`--conditions=@skein/source` runs the sources).
    const conditions = process.execArgv.filter((arg) => arg.startsWith("--conditions"))
    const child = ChildProcess.spawn(tsx, [...conditions, Path.resolve(import.meta.dirname, "fakeModelServer.ts")], {
      stdio: ["pipe", "pipe", "inherit"]
    })
    Readline.createInterface({ input: child.stdout }).once("line", (url) => resume(Effect.succeed({ url, child })))
    child.once("exit", (code) => resume(Effect.dieMessage(`FakeModel's process exited (${code}) before it listened`)))
  }),
  ({ child }) =>
    Effect.async<void>((resume) => {
      if (child.exitCode !== null) return resume(Effect.void)
      child.once("exit", () => resume(Effect.void))
      child.stdin?.end()
    })
)
