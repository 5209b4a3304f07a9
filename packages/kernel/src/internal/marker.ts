/**
 * Environment markers that find a child's descendants wherever they went.
 *
 * A process group does not hold everything a child starts: the Claude Code
 * CLI runs each Bash command in a new session (setsid), and once the CLI is
 * gone those commands are reparented away. They still inherit the
 * environment, so ProcessHost gives every child a marker unique to it and
 * finds the escapees by scanning `/proc/<pid>/environ`.
 *
 * Linux only. Elsewhere another process's environment is not cheaply
 * readable, so the scan finds nothing and the group kill is all there is. A
 * descendant that clears its environment (`env -i`) escapes as well.
 */
import { Effect } from "effect"
import * as NodeCrypto from "node:crypto"
import * as NodeFs from "node:fs"
import * as procfs from "./procfs.js"

/** The variable every ProcessHost child, and whatever it starts, carries. */
export const variable = "SKEIN_PROCESS"

const separator = ","

/** Unique to one ProcessHost: markers are `<runtime id>.<n>`. */
export const makeRuntimeId = (): string => `${process.pid.toString(36)}-${NodeCrypto.randomBytes(4).toString("hex")}`

/**
 * The value a child gets: the markers this process inherited, then the
 * child's own. A runtime that is itself a marked child so passes its parent's
 * marker on, and the parent's sweep reaches the runtime's children as well.
 */
export const chain = (inherited: string | undefined, marker: string): string =>
  inherited === undefined || inherited === "" ? marker : `${inherited}${separator}${marker}`

/** Whether a NUL-separated environment block carries `marker`. */
export const carries = (environ: string, marker: string): boolean => {
  const prefix = `${variable}=`
  for (const entry of environ.split("\0")) {
    if (entry.startsWith(prefix) && entry.slice(prefix.length).split(separator).includes(marker)) return true
  }
  return false
}

/** Live processes (zombies excluded) that carry `marker`; never this process. */
export const scan = (marker: string): ReadonlyArray<number> => {
  if (!procfs.hasProc()) return []
  let names: ReadonlyArray<string>
  try {
    names = NodeFs.readdirSync("/proc")
  } catch {
    return []
  }
  const pids: Array<number> = []
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue
    const pid = Number(name)
    if (pid === process.pid) continue
    try {
      // latin1: any byte sequence reads, and the marker is ASCII.
      if (carries(NodeFs.readFileSync(`/proc/${name}/environ`, "latin1"), marker) && procfs.isLive(pid)) {
        pids.push(pid)
      }
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return pids
}

/**
 * SIGKILLs every process that carries `marker`, in rounds: a dying shell may
 * still fork, so each round waits for its victims to die and scans again,
 * until a scan comes back empty or the rounds run out. Returns every pid it
 * signalled. The environment is re-read right before each kill, so a pid is
 * killed only while it carries the marker.
 */
export const killAll = (marker: string, options?: {
  readonly rounds?: number | undefined
  readonly settleMillis?: number | undefined
}): Effect.Effect<ReadonlyArray<number>> =>
  Effect.gen(function*() {
    const killed = new Set<number>()
    const rounds = options?.rounds ?? 5
    for (let round = 0; round < rounds; round++) {
      const pids = scan(marker)
      if (pids.length === 0) break
      for (const pid of pids) {
        try {
          process.kill(pid, "SIGKILL")
          killed.add(pid)
        } catch {
          // ESRCH: already gone.
        }
      }
      yield* procfs.waitUntil(() => pids.every((pid) => !procfs.isLive(pid)), options?.settleMillis ?? 500)
    }
    return Array.from(killed)
  })
