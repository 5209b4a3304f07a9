/**
 * Runs the `skein` bin as a child process (node + tsx, as a person's shell
 * would) in a folder of its own, and finds any process it left behind.
 */
import { Effect, Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

export const bin = Path.resolve(import.meta.dirname, "../bin/skein.js")

export interface Ran {
  readonly code: number | null
  readonly signal: string | null
  readonly stdout: string
  readonly stderr: string
}

/** A temp folder for the run, removed with the scope. */
export const folder = Effect.acquireRelease(
  Effect.sync(() => Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-cli-test-")))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

export interface Options {
  readonly cwd: string
  readonly stdin?: string | undefined
  /** Called with the child and its output so far, on each chunk of stdout. */
  readonly onStdout?: ((child: ChildProcess.ChildProcess, stdout: string) => void) | undefined
  readonly onStderr?: ((child: ChildProcess.ChildProcess, stderr: string) => void) | undefined
  /** Leave stdin open after writing `stdin`. */
  readonly keepStdin?: boolean | undefined
  /** Called with the child once it is spawned. */
  readonly onSpawn?: ((child: ChildProcess.ChildProcess) => void) | undefined
  /** Variables to set (a string) or unset (undefined) over this process's environment. */
  readonly env?: Readonly<Record<string, string | undefined>> | undefined
}

/** Runs `skein ...args` to its exit. */
export const skein = (args: ReadonlyArray<string>, options: Options): Effect.Effect<Ran> =>
  Effect.async<Ran>((resume) => {
    const child = ChildProcess.spawn(process.execPath, [bin, ...args], {
      cwd: options.cwd,
      env: { ...process.env, NO_COLOR: "1", ...options.env },
      stdio: ["pipe", "pipe", "pipe"]
    })
    options.onSpawn?.(child)
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (text: string) => {
      stdout += text
      options.onStdout?.(child, stdout)
    })
    child.stderr.setEncoding("utf8").on("data", (text: string) => {
      stderr += text
      options.onStderr?.(child, stderr)
    })
    child.once("close", (code, signal) => resume(Effect.succeed({ code, signal, stdout, stderr })))
    if (options.stdin !== undefined) child.stdin.write(options.stdin)
    if (options.keepStdin !== true) child.stdin.end()
    return Effect.sync(() => {
      child.kill("SIGKILL")
    })
  })

/** The one line a failing command printed, checked to be the only output. */
export const errorLine = (ran: Ran): string => {
  const lines = ran.stderr.split("\n").filter((line) => line.length > 0)
  if (ran.code === 0 || ran.stdout !== "" || lines.length !== 1 || !lines[0]!.startsWith("skein: ")) {
    throw new Error(`expected one error line and a non-zero exit, got ${ran.code}: ${JSON.stringify(ran)}`)
  }
  return lines[0]!
}

/** The command lines of the live processes in `dir` (see `processesIn`). */
export const commandsIn = (dir: string): ReadonlyArray<string> =>
  processesIn(dir).flatMap((pid) => {
    try {
      return [Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim()]
    } catch {
      return []
    }
  })

/** Pids of live processes whose working folder is `dir` or inside it. */
export const processesIn = (dir: string): ReadonlyArray<number> =>
  Fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).flatMap((name) => {
    try {
      const cwd = Fs.readlinkSync(`/proc/${name}/cwd`)
      return cwd === dir || cwd.startsWith(`${dir}/`) ? [Number(name)] : []
    } catch {
      return []
    }
  })

export type { Scope }
