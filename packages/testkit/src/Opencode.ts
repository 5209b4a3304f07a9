/**
 * opencode's own binary (npm `opencode-ai`), run offline: a private HOME, no
 * autoupdate, no models fetch, and an `opencode.json` whose `anthropic`
 * provider points at a FakeModel. Its clients send the server's token as
 * basic auth through `OPENCODE_SERVER_PASSWORD`.
 */
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"

/** The workspace's `opencode` (npm `opencode-ai`, a dev dependency), from `src/` or `dist/` alike. */
export const binary = Path.resolve(import.meta.dirname, "../../../node_modules/.bin/opencode")

export interface Env {
  readonly home: string
  readonly env: Record<string, string>
}

/** A HOME under `root` and the project's `opencode.json` in `cwd`. */
export const offline = (options: { readonly root: string; readonly cwd: string; readonly modelUrl: string; readonly password?: string }): Env => {
  const home = Path.join(options.root, "opencode-home")
  Fs.mkdirSync(home, { recursive: true })
  Fs.writeFileSync(
    Path.join(options.cwd, "opencode.json"),
    JSON.stringify({
      provider: { anthropic: { options: { baseURL: `${options.modelUrl}/v1`, apiKey: "sk-fake" } } },
      model: "anthropic/claude-sonnet-4-5",
      autoupdate: false,
      share: "disabled"
    })
  )
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: home,
    XDG_CONFIG_HOME: Path.join(home, ".config"),
    XDG_DATA_HOME: Path.join(home, ".local", "share"),
    XDG_CACHE_HOME: Path.join(home, ".cache"),
    XDG_STATE_HOME: Path.join(home, ".local", "state"),
    TERM: "xterm-256color",
    OPENCODE_DISABLE_AUTOUPDATE: "1",
    OPENCODE_DISABLE_MODELS_FETCH: "1",
    ...(options.password === undefined ? {} : { OPENCODE_SERVER_PASSWORD: options.password })
  }
  return { home, env }
}

export interface Exited {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs `opencode args…` to its exit; killed (by its pid) if the fiber is interrupted. */
export const run = (args: ReadonlyArray<string>, options: { readonly cwd: string; readonly env: Record<string, string> }) =>
  Effect.async<Exited>((resume) => {
    const child = ChildProcess.spawn(binary, args, { cwd: options.cwd, env: options.env, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8")
    })
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8")
    })
    child.on("close", (code) => resume(Effect.succeed({ code, stdout, stderr })))
    return Effect.sync(() => {
      if (child.exitCode === null) child.kill("SIGKILL")
    })
  })
