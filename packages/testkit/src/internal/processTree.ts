/**
 * Finds the processes a run left behind. The CLI starts every Bash tool
 * command in a new session (setsid), so killing the CLI's process group does
 * not reach them, and once the CLI is gone they are reparented away. They
 * still carry the run's environment, so a marker variable finds them in
 * `/proc` (Linux; elsewhere this finds nothing).
 */
import { Effect } from "effect"
import * as Fs from "node:fs"

/** The environment variable that marks a run's processes. */
export const markerVariable = "SKEIN_CLAUDE_RUN"

const marked = (marker: string): ReadonlyArray<number> => {
  let entries: ReadonlyArray<string>
  try {
    entries = Fs.readdirSync("/proc")
  } catch {
    return []
  }
  const needle = `${markerVariable}=${marker}`
  const pids: Array<number> = []
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    const pid = Number(entry)
    if (pid === process.pid) continue
    try {
      const environ = Fs.readFileSync(`/proc/${entry}/environ`, "latin1")
      if (environ.split("\0").includes(needle)) pids.push(pid)
    } catch {
      // Gone, or not ours to read.
    }
  }
  return pids
}

const kill = (pid: number, signal: NodeJS.Signals) => {
  try {
    process.kill(pid, signal)
  } catch {
    // ESRCH: already gone.
  }
}

/**
 * SIGKILLs the process group `pgid` and every process marked with `marker`,
 * repeating while new marked processes appear (a dying shell may fork).
 */
export const killAll = (pgid: number, marker: string): Effect.Effect<void> =>
  Effect.sync(() => {
    kill(-pgid, "SIGKILL")
    for (let round = 0; round < 10; round++) {
      const pids = marked(marker)
      if (pids.length === 0) return
      for (const pid of pids) kill(pid, "SIGKILL")
    }
  })

/** The pids still alive that carry `marker`. */
export const survivors = (marker: string): Effect.Effect<ReadonlyArray<number>> => Effect.sync(() => marked(marker))
