/**
 * Which pids a child's descendants can hold, so that the sweep for escapees
 * after a close reads the environment of those alone instead of every
 * process's.
 *
 * Linux hands out pids in a cycle: each new process gets the next free pid
 * after the last one given (`/proc/loadavg`'s last field), wrapping at
 * `pid_max`. A descendant of a child was created after the child, so while
 * the allocator has not come round the whole cycle since the child started,
 * its pid lies in the cyclic window from the child's pid to the last pid
 * given. Coming round takes more than `pid_max - 300` new processes (the wrap
 * restarts at 300, and live pids are skipped), and the kernel counts every
 * process created since boot (`processes` in `/proc/stat`). So a window is
 * used only when fewer than half of `pid_max` processes were created since a
 * count taken before the child started; otherwise the sweep reads every
 * process, as it always did.
 *
 * The window only narrows which environments are read: the marker in the
 * environment still decides, so a pid reused by a stranger is never killed.
 */
import { Effect, Option } from "effect"
import * as NodeFs from "node:fs"
import * as procfs from "./procfs.js"

/** Where a child's descendants start: its pid, and a count of processes created no later than it. */
export interface Origin {
  readonly pid: number
  readonly forks: number
}

/** The allocator's state at a sweep, read after the sweep listed /proc. */
export interface Now {
  readonly lastPid: number
  readonly forks: number
  readonly pidMax: number
}

/** `processes` of /proc/stat: every process and thread created since boot. */
export const parseForks = (stat: string): Option.Option<number> => {
  const at = stat.indexOf("\nprocesses ")
  if (at < 0) return Option.none()
  const value = Number.parseInt(stat.slice(at + 11, stat.indexOf("\n", at + 11)), 10)
  return Number.isSafeInteger(value) ? Option.some(value) : Option.none()
}

/** The last field of /proc/loadavg: the pid given last in this pid namespace. */
export const parseLastPid = (loadavg: string): Option.Option<number> => {
  const value = Number.parseInt(loadavg.trim().split(" ").at(-1) ?? "", 10)
  return Number.isSafeInteger(value) && value > 0 ? Option.some(value) : Option.none()
}

let pidMax: Option.Option<number> | undefined
const readPidMax = (): Option.Option<number> => {
  if (pidMax !== undefined) return pidMax
  try {
    const value = Number.parseInt(NodeFs.readFileSync("/proc/sys/kernel/pid_max", "latin1"), 10)
    pidMax = Number.isSafeInteger(value) && value > 0 ? Option.some(value) : Option.none()
  } catch {
    pidMax = Option.none()
  }
  return pidMax
}

/** The latest count read, by anyone in this process, and when (ms since the epoch). */
let latest: { readonly forks: number; readonly at: number } | undefined

/** How old a count may be before a spawn reads a fresh one: a stale count only widens the sweep's fallback. */
const freshMillis = 1_000

const remember = (forks: number): void => {
  if (latest === undefined || forks >= latest.forks) latest = { forks, at: Date.now() }
}

/**
 * A count of processes created so far, for the origin of a child about to
 * start: any count read earlier is a lower bound of the count at its start,
 * so the latest one a sweep read serves while it is fresh; otherwise a short
 * synchronous read of /proc/stat.
 */
export const forksBefore = (): Option.Option<number> => {
  if (latest !== undefined && Date.now() - latest.at < freshMillis) return Option.some(latest.forks)
  if (!procfs.hasProc()) return Option.none()
  try {
    const forks = parseForks(NodeFs.readFileSync("/proc/stat", "latin1"))
    if (Option.isSome(forks)) remember(forks.value)
    return forks
  } catch {
    return Option.none()
  }
}

const readSmall = (file: string): Option.Option<string> => {
  try {
    return Option.some(NodeFs.readFileSync(file, "latin1"))
  } catch {
    return Option.none()
  }
}

/**
 * The allocator's state; none without /proc or when a file cannot be parsed.
 * Read synchronously: two one-line kernel files cost microseconds, where two
 * asynchronous reads cost each release's sweep a few hundred of CPU.
 */
export const now: Effect.Effect<Option.Option<Now>> = Effect.sync(() => {
  const max = readPidMax()
  if (Option.isNone(max)) return Option.none()
  const forks = Option.flatMap(readSmall("/proc/stat"), parseForks)
  if (Option.isSome(forks)) remember(forks.value)
  return Option.all({ lastPid: Option.flatMap(readSmall("/proc/loadavg"), parseLastPid), forks, pidMax: max })
})

/** Whether `pid` lies in the cyclic window [from, to]. */
const within = (from: number, to: number, pid: number): boolean => from <= to ? from <= pid && pid <= to : pid >= from || pid <= to

/**
 * The pids the descendants of `origins` can hold, as a test; none when any
 * origin is too old to tell (the allocator may have come round since), and
 * the sweep must read every process.
 */
export const window = (origins: ReadonlyArray<Origin>, now: Now): Option.Option<(pid: number) => boolean> => {
  const safe = Math.floor(now.pidMax / 2)
  if (origins.some((origin) => now.forks - origin.forks >= safe || now.forks < origin.forks)) return Option.none()
  return Option.some((pid) => origins.some((origin) => within(origin.pid, now.lastPid, pid)))
}

/**
 * Every pid of the window, when it holds at most `limit`: a sweep then opens
 * those alone, without listing /proc (a listing costs as much as dozens of
 * opens). None when the window is unknown or larger.
 */
export const windowPids = (
  origins: ReadonlyArray<Origin>,
  now: Now,
  limit: number
): Option.Option<ReadonlyArray<number>> => {
  if (Option.isNone(window(origins, now))) return Option.none()
  const pids = new Set<number>()
  for (const origin of origins) {
    const size = origin.pid <= now.lastPid ? now.lastPid - origin.pid + 1 : now.pidMax - origin.pid + now.lastPid
    if (size > limit) return Option.none()
    for (let i = 0, pid = origin.pid; i < size; i++, pid = pid + 1 >= now.pidMax ? 1 : pid + 1) pids.add(pid)
    if (pids.size > limit) return Option.none()
  }
  return Option.some(Array.from(pids))
}
