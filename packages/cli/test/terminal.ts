/**
 * A real terminal for `skein`: tmux on a private socket, keys sent to the
 * pane, the screen read back. Only the test's own tmux server is ever killed.
 */
import { Effect, Schedule } from "effect"
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import { bin, processesIn } from "./skein.js"

const quote = (arg: string) => `'${arg.replace(/'/g, `'\\''`)}'`

export interface Options {
  /** Read the screen with wrapped lines joined (`capture-pane -J`): a redrawn line is then one line. */
  readonly joinWrapped?: boolean | undefined
}

/** A tmux server of its own, killed with the scope; the pane runs `skein ...args` in `cwd`, then shows its exit status. */
export const terminal = (cwd: string, args: ReadonlyArray<string>, options: Options = {}) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const socket = `skein-tui-${process.pid}-${Crypto.randomBytes(4).toString("hex")}`
      const tmux = (...rest: ReadonlyArray<string>) =>
        ChildProcess.execFileSync("tmux", ["-L", socket, "-f", "/dev/null", ...rest], { encoding: "utf8", stdio: "pipe" })
      // The shell only reports the exit status: a trap (not inherited) keeps Ctrl-C from ending it first.
      const command = `trap true INT; ${[process.execPath, bin, ...args].map(quote).join(" ")}; echo "[exit $?]"; exec sleep 600`
      tmux("new-session", "-d", "-x", "160", "-y", "45", "-c", cwd, "sh", "-c", command)
      const capture = options.joinWrapped === true ? ["capture-pane", "-p", "-J"] : ["capture-pane", "-p"]
      return {
        keys: (...keys: ReadonlyArray<string>) => void tmux("send-keys", "-t", "0", ...keys),
        screen: () => tmux(...capture, "-t", "0", "-S", "-200"),
        kill: () => {
          try {
            tmux("kill-server")
          } catch {
            // Already gone.
          }
        }
      }
    }),
    (t) => Effect.sync(t.kill)
  )

export type Terminal = Effect.Effect.Success<ReturnType<typeof terminal>>

/** The screen once it matches `pattern`. */
export const waitFor = (t: Terminal, pattern: RegExp, within = "120 seconds" as const) =>
  Effect.sync(t.screen).pipe(
    Effect.filterOrFail((screen) => pattern.test(screen), () => new Error(`the screen never showed ${pattern}:\n${t.screen()}`)),
    Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo(within)))
  )

/** No process is left in `cwd` once the tmux server is gone. */
export const nothingLeft = (t: Terminal, cwd: string) =>
  Effect.sync(() => {
    t.kill()
    return processesIn(cwd)
  }).pipe(
    Effect.filterOrFail((left) => left.length === 0),
    Effect.retry(Schedule.spaced("200 millis").pipe(Schedule.upTo("10 seconds"))),
    Effect.orElseSucceed(() => processesIn(cwd))
  )
