/**
 * A command run to its exit with its output collected, for tests that drive
 * whole programs (npm, node, the packed bin). Interrupting the effect
 * SIGKILLs the command.
 */
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"

export interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

export const run = (
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env: Record<string, string> }
): Effect.Effect<Ran> =>
  Effect.async<Ran>((resume) => {
    const child = ChildProcess.spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (text: string) => (stdout += text))
    child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text))
    child.once("close", (code) => resume(Effect.succeed({ code, stdout, stderr })))
    return Effect.sync(() => {
      child.kill("SIGKILL")
    })
  })
