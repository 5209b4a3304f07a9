/**
 * Starting a child program: its own process group (`detached`), no shell,
 * three pipes, and the environment it asked for.
 */
import { Effect, Option } from "effect"
import * as NodeChildProcess from "node:child_process"
import type { Readable, Writable } from "node:stream"
import type * as ProcessHost from "../ProcessHost.js"
import * as Errors from "../ProcessHost.js"
import * as procfs from "./procfs.js"

export type NodeChild = NodeChildProcess.ChildProcessByStdio<Writable, Readable, Readable>

/**
 * `env` over `process.env` (or alone, with `envMode: "replace"`); an
 * undefined value removes the variable. Merged, the result inherits from
 * `process.env` and holds only the overrides: Node's spawn reads inherited
 * variables as well and skips undefined ones, so the child gets the same
 * environment without a copy of `process.env` per spawn (each variable of it
 * a call into the runtime, some 50 µs and a few KB a spawn).
 */
export const buildEnv = (options: ProcessHost.SpawnOptions): NodeJS.ProcessEnv => {
  const base: NodeJS.ProcessEnv = options.envMode === "replace" ? {} : Object.create(process.env)
  for (const [name, value] of Object.entries(options.env ?? {})) {
    if (value !== undefined) base[name] = value
    else if (options.envMode === "replace") delete base[name]
    // Shadows the inherited variable; spawn leaves it out.
    else base[name] = undefined
  }
  return base
}

/**
 * Starts the program; resolves once Node reports `spawn` or `error`. `wire`
 * gets the child synchronously, before the event loop runs again.
 */
export const start = (
  options: ProcessHost.SpawnOptions,
  args: ReadonlyArray<string>,
  source: procfs.IdentitySource,
  wire: (child: NodeChild) => void
): Effect.Effect<
  { readonly node: NodeChild; readonly identity: Option.Option<procfs.Identity> },
  ProcessHost.SpawnError
> =>
  Effect.async((resume) => {
    const failWith = (error: unknown) =>
      resume(Effect.fail(
        new Errors.SpawnError({
          command: options.command,
          args,
          ...(procfs.errnoCode(error) !== undefined ? { code: procfs.errnoCode(error)! } : {}),
          reason: error instanceof Error ? error.message : String(error)
        })
      ))
    let child: NodeChild
    try {
      child = NodeChildProcess.spawn(options.command, args, {
        cwd: options.cwd,
        env: buildEnv(options),
        stdio: ["pipe", "pipe", "pipe"],
        detached: true,
        shell: false,
        windowsHide: true
      })
    } catch (error) {
      failWith(error)
      return
    }
    // Now, before the event loop runs: a child that exits at once must still
    // be journaled (a shell that leaves background jobs behind), and its exit
    // and output must not be emitted before anyone listens.
    if (child.pid !== undefined) wire(child)
    const identity = source === "proc" && child.pid !== undefined
      ? procfs.snapshotProc(child.pid, [options.command, ...args])
      : Option.none()
    const onSpawn = () => {
      child.off("error", onError)
      resume(Effect.succeed({ node: child, identity }))
    }
    const onError = (error: unknown) => {
      child.off("spawn", onSpawn)
      failWith(error)
    }
    child.once("spawn", onSpawn)
    child.once("error", onError)
  })
