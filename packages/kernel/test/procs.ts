/**
 * Helpers for tests that start real processes.
 */
import { Effect } from "effect"
import * as NodeFs from "node:fs"

/** True when the pid is not running: no /proc entry, or a zombie nobody reaped yet. */
export const isGone = (pid: number): boolean => {
  try {
    const stat = NodeFs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")
  } catch {
    return true
  }
}

export const isAlive = (pid: number): boolean => !isGone(pid)

/** Waits on real timers (SIGKILL lands asynchronously) for up to `maxMillis`. */
export const waitGone = (pids: ReadonlyArray<number>, maxMillis = 5_000): Effect.Effect<boolean> =>
  Effect.promise(async () => {
    const deadline = Date.now() + maxMillis
    while (Date.now() < deadline) {
      if (pids.every(isGone)) return true
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    return pids.every(isGone)
  })

/** Real-time pause, for tests that run under a TestClock. */
export const realSleep = (millis: number): Effect.Effect<void> =>
  Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, millis)))

/** SIGKILLs a process group, then the pid itself, ignoring processes that are gone. */
export const killQuietly = (pid: number): void => {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, "SIGKILL")
    } catch {
      // already gone
    }
  }
}

/** A scoped guard that kills the pids on scope close, whatever the test's outcome. */
export const guard = (pids: () => ReadonlyArray<number>) =>
  Effect.addFinalizer(() => Effect.sync(() => pids().forEach(killQuietly)))
