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
import { Effect, Option } from "effect"
import * as NodeCrypto from "node:crypto"
import * as PidWindow from "./pidWindow.js"
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

const prefix = Buffer.from(`${variable}=`, "latin1")

/**
 * The markers of `wanted` that a NUL-separated environment block carries.
 * It looks for the variable in the bytes and decodes only its value: a sweep
 * reads every process's environment, and almost none carries it.
 */
const carried = (environ: Buffer, wanted: ReadonlySet<string>): ReadonlyArray<string> => {
  let at = environ.indexOf(prefix)
  // Only at the start of an entry: `OTHER_SKEIN_PROCESS=` is not it.
  while (at > 0 && environ[at - 1] !== 0) at = environ.indexOf(prefix, at + 1)
  if (at < 0) return []
  const start = at + prefix.length
  const end = environ.indexOf(0, start)
  // latin1: any byte sequence decodes, and markers are ASCII.
  return environ.toString("latin1", start, end < 0 ? environ.length : end).split(separator).filter((m) => wanted.has(m))
}

/** Whether a NUL-separated environment block carries `marker`. */
export const carries = (environ: string, marker: string): boolean =>
  carried(Buffer.from(environ, "latin1"), new Set([marker])).length > 0

export interface ScanOptions {
  /**
   * Where the markers' children started: the scan then reads only the pids
   * their descendants can hold (see pidWindow.ts), or every pid when that
   * cannot be told. Without it, every pid.
   */
  readonly origins?: ReadonlyArray<PidWindow.Origin> | undefined
}

/**
 * Up to how many pids a window is read pid by pid, synchronously, without
 * listing /proc: a listing costs as much CPU as dozens of opens, and 64 reads
 * block the event loop well under a millisecond. A pipeline of 8 sessions
 * sweeps about 13 pids a release.
 */
const probeLimit = 64

/**
 * The pids to read: every one listed, or those in the origins' window. A
 * small window is read whole, pid by pid (a pid not in use fails to open),
 * without listing /proc, and synchronously: a few opens cost less than the
 * listing, or the trips through the thread pool, would. The allocator is read
 * first then: a descendant alive at that read got its pid before it, so lies
 * in the window; one started after, as after a listing, is left to the next
 * round.
 */
interface Candidates {
  readonly pids: ReadonlyArray<number>
  /** Few enough to read synchronously. */
  readonly few: boolean
}

const candidates = (options?: ScanOptions): Effect.Effect<Candidates> => {
  const origins = options?.origins
  const listed = Effect.map(procfs.listPids, (listed) => listed.filter((pid) => pid !== process.pid))
  if (origins === undefined) return Effect.map(listed, (pids) => ({ pids, few: false }))
  return Effect.flatMap(PidWindow.now, (now): Effect.Effect<Candidates> => {
    const small = Option.flatMap(now, (now) => PidWindow.windowPids(origins, now, probeLimit))
    if (Option.isSome(small)) return Effect.succeed({ pids: small.value.filter((pid) => pid !== process.pid), few: true })
    // Listed first, the allocator read after: every pid listed was given before that read.
    return Effect.flatMap(listed, (pids) =>
      Effect.map(PidWindow.now, (now) => ({
        pids: Option.match(Option.flatMap(now, (now) => PidWindow.window(origins, now)), {
          onNone: () => pids,
          onSome: (inWindow) => pids.filter(inWindow)
        }),
        few: false
      })))
  })
}

/**
 * Live processes (zombies excluded) that carry any of `markers`, by marker;
 * never this process. One pass over /proc serves every marker, and reads
 * asynchronously (see procfs.ts).
 */
export const scanAll = (
  markers: ReadonlySet<string>,
  options?: ScanOptions
): Effect.Effect<ReadonlyMap<string, ReadonlyArray<number>>> =>
  Effect.gen(function*() {
    const found = new Map<string, Array<number>>()
    if (markers.size === 0 || !procfs.hasProc()) return found
    const { few, pids } = yield* candidates(options)
    const files = pids.map((pid) => `/proc/${pid}/environ`)
    const read = (environ: Buffer) => carried(environ, markers)
    const environs = few ? procfs.readProcFilesSync(files, read) : yield* procfs.readProcFiles(files, read)
    const hits = new Map<number, ReadonlyArray<string>>()
    pids.forEach((pid, i) => {
      const carriedBy = Option.getOrElse(environs[i]!, () => [])
      if (carriedBy.length > 0) hits.set(pid, carriedBy)
    })
    for (const pid of yield* procfs.liveAmong(Array.from(hits.keys()))) {
      for (const marker of hits.get(pid)!) found.set(marker, [...(found.get(marker) ?? []), pid])
    }
    return found
  })

/** Live processes (zombies excluded) that carry `marker`; never this process. */
export const scan = (marker: string): Effect.Effect<ReadonlyArray<number>> =>
  Effect.map(scanAll(new Set([marker])), (found) => found.get(marker) ?? [])

/**
 * SIGKILLs every process that carries one of `markers`, in rounds: a dying
 * shell may still fork, so each round waits for its victims to die and scans
 * again, until a scan comes back empty or the rounds run out. Returns, by
 * marker, every pid it signalled. Each round re-reads the environments right
 * before its kills, so a pid is killed only while it carries a marker.
 */
export const killAll = (markers: ReadonlySet<string>, options?: ScanOptions & {
  readonly rounds?: number | undefined
  readonly settleMillis?: number | undefined
}): Effect.Effect<ReadonlyMap<string, ReadonlyArray<number>>> =>
  Effect.gen(function*() {
    const killed = new Map<string, Set<number>>()
    const rounds = options?.rounds ?? 5
    for (let round = 0; round < rounds; round++) {
      const found = yield* scanAll(markers, options)
      if (found.size === 0) break
      const victims = new Set<number>()
      for (const [marker, pids] of found) {
        for (const pid of pids) {
          try {
            process.kill(pid, "SIGKILL")
            victims.add(pid)
            killed.set(marker, (killed.get(marker) ?? new Set()).add(pid))
          } catch {
            // ESRCH: already gone.
          }
        }
      }
      yield* procfs.waitGone(Array.from(victims), options?.settleMillis ?? 500)
    }
    return new Map(Array.from(killed, ([marker, pids]) => [marker, Array.from(pids)]))
  })

/** `killAll` for one marker. */
export const killMarked = (marker: string): Effect.Effect<ReadonlyArray<number>> =>
  Effect.map(killAll(new Set([marker])), (killed) => killed.get(marker) ?? [])
