/**
 * Process identity and liveness, read from /proc on Linux and from `ps`
 * elsewhere. A pid alone is not an identity (pids are reused), so an
 * identity pairs it with the start time and the command line.
 *
 * /proc files are kernel queries answered from memory, read with node:fs
 * rather than through FileSystem: this keeps ProcessHost free of a
 * FileSystem requirement. What runs while children are ended (the group
 * sweep, the liveness polls) reads asynchronously: a service hosting many
 * sessions shares one event loop, and a sweep of /proc per kill would stall
 * all of them. Reads of one small file stay synchronous: at spawn they must
 * happen in the spawn's own tick (see `snapshotProc`), and elsewhere one
 * costs less than the trip through the thread pool an asynchronous one takes.
 */
import { Clock, Duration, Effect, Option, Schedule } from "effect"
import * as NodeChildProcess from "node:child_process"
import * as NodeCrypto from "node:crypto"
import * as NodeFs from "node:fs"

const readText = (file: string): Option.Option<string> => {
  try {
    return Option.some(NodeFs.readFileSync(file, "utf8"))
  } catch {
    return Option.none()
  }
}

/** How identities were read: the two sources never compare equal. */
export type IdentitySource = "proc" | "ps"

export interface Identity {
  readonly source: IdentitySource
  /** proc: field 22 of /proc/<pid>/stat (clock ticks after boot); ps: `lstart`. */
  readonly startTime: string
  /**
   * proc: /proc/<pid>/cmdline with NUL separators, or its digest (see
   * `digestCmdline`); ps: `command`.
   */
  readonly cmdline: string
}

const digestPrefix = "sha256:"

/**
 * What a child's identity keeps of its command line: a digest, not the
 * bytes. An identity lives as long as its process (and its journal entry),
 * and a CLI's command line runs to kilobytes; comparing needs no more than
 * the digest.
 */
export const digestCmdline = (cmdline: string): string =>
  cmdline.startsWith(digestPrefix)
    ? cmdline
    : `${digestPrefix}${NodeCrypto.createHash("sha256").update(cmdline, "utf8").digest("base64")}`

export interface ProcStat {
  readonly state: string
  readonly pgrp: number
  readonly startTime: string
}

/** Parses /proc/<pid>/stat; the comm field may hold spaces and parentheses. */
export const parseStat = (text: string): Option.Option<ProcStat> => {
  const close = text.lastIndexOf(")")
  if (close < 0) return Option.none()
  // Fields after the comm start at field 3 (state).
  const fields = text.slice(close + 2).trim().split(/\s+/)
  const state = fields[0]
  const pgrp = fields[5 - 3]
  const startTime = fields[22 - 3]
  if (state === undefined || pgrp === undefined || startTime === undefined) return Option.none()
  return Option.some({ state, pgrp: Number(pgrp), startTime })
}

export const readStat = (pid: number): Option.Option<ProcStat> =>
  Option.flatMap(readText(`/proc/${pid}/stat`), parseStat)

let procPresent: boolean | undefined
/** Whether this system has /proc; asked once (it does not come and go). */
export const hasProc = (): boolean => (procPresent ??= NodeFs.existsSync("/proc/self/stat"))

/** The source to use on this system. */
export const defaultSource = (): IdentitySource => hasProc() ? "proc" : "ps"

/** How much one read of a /proc file asks for; a file that fills it is read on. */
const readChunk = 16 * 1024

/** Read buffers returned by finished reads, so that a sweep does not allocate one per file. */
const spareBuffers: Array<Buffer> = []

/**
 * Reads a /proc file whole and calls back with `use` of its bytes, which
 * must not keep them (the buffer is reused). Open, read, close, on the
 * callback API: `readFile` would also fstat the file and, since /proc
 * reports size 0, read once more to find the end, in a fresh 64 KiB buffer,
 * and a sweep pays that for every process. A short read is the end: the
 * kernel produces these files whole, up to the size asked (`environ` page by
 * page).
 */
const readWith = <A>(file: string, use: (bytes: Buffer) => A, done: (result: Option.Option<A>) => void): void =>
  NodeFs.open(file, "r", (error, fd) => {
    if (error) return done(Option.none())
    let buffer = spareBuffers.pop() ?? Buffer.allocUnsafe(readChunk)
    const spare = (used: Buffer) => {
      if (used.length === readChunk && spareBuffers.length < sweepConcurrency) spareBuffers.push(used)
    }
    let length = 0
    const finish = (read: boolean) => {
      NodeFs.close(fd, () => {})
      const result = read ? Option.some(use(buffer.subarray(0, length))) : Option.none()
      spare(buffer)
      done(result)
    }
    const readOn = (): void =>
      NodeFs.read(fd, buffer, length, buffer.length - length, null, (error, bytesRead) => {
        if (error) return finish(false)
        length += bytesRead
        if (length < buffer.length) return finish(true)
        const larger = Buffer.allocUnsafe(buffer.length * 2)
        buffer.copy(larger, 0, 0, length)
        spare(buffer)
        buffer = larger
        readOn()
      })
    readOn()
  })

/** `use` of a /proc file's bytes (see `readWith`); none when it cannot be read. */
export const readProcFile = <A>(file: string, use: (bytes: Buffer) => A): Effect.Effect<Option.Option<A>> =>
  Effect.async<Option.Option<A>>((resume) => readWith(file, use, (result) => resume(Effect.succeed(result))))

/**
 * `readProcFile` for each of `files`, `sweepConcurrency` at a time, in
 * order. The reads chain on plain callbacks and the fiber resumes once: a
 * sweep reads a file per process, and a fiber step per file would cost more
 * on the event loop than the file.
 */
export const readProcFiles = <A>(
  files: ReadonlyArray<string>,
  use: (bytes: Buffer) => A
): Effect.Effect<ReadonlyArray<Option.Option<A>>> =>
  Effect.async<ReadonlyArray<Option.Option<A>>>((resume) => {
    const results = new Array<Option.Option<A>>(files.length).fill(Option.none())
    let started = 0
    let finished = 0
    const startMore = (): void => {
      while (started < files.length && started - finished < sweepConcurrency) {
        const index = started++
        readWith(files[index]!, use, (result) => {
          results[index] = result
          if (++finished === files.length) resume(Effect.succeed(results))
          else startMore()
        })
      }
    }
    if (files.length === 0) resume(Effect.succeed(results))
    else startMore()
  })

/** A read buffer for the synchronous reads, grown as a file needs. */
let syncBuffer = Buffer.allocUnsafe(readChunk)

/**
 * `readProcFiles`, synchronously: for a few files (a small pid window), where
 * each asynchronous open costs more CPU than the read it waits for.
 */
export const readProcFilesSync = <A>(
  files: ReadonlyArray<string>,
  use: (bytes: Buffer) => A
): ReadonlyArray<Option.Option<A>> =>
  files.map((file) => {
    let fd: number
    try {
      fd = NodeFs.openSync(file, "r")
    } catch {
      return Option.none()
    }
    try {
      let length = 0
      for (;;) {
        length += NodeFs.readSync(fd, syncBuffer, length, syncBuffer.length - length, null)
        if (length < syncBuffer.length) return Option.some(use(syncBuffer.subarray(0, length)))
        const larger = Buffer.allocUnsafe(syncBuffer.length * 2)
        syncBuffer.copy(larger, 0, 0, length)
        syncBuffer = larger
      }
    } catch {
      return Option.none()
    } finally {
      NodeFs.closeSync(fd)
    }
  })

/** The numeric entries of /proc: every process, this one included. */
export const listPids: Effect.Effect<ReadonlyArray<number>> = Effect.async((resume) => {
  NodeFs.readdir("/proc", (error, names) =>
    resume(Effect.succeed(error ? [] : names.filter((name) => /^\d+$/.test(name)).map(Number))))
})

/** The stat of each of `pids`, read together (see `readProcFiles`); none for one gone. */
const readStats = (pids: ReadonlyArray<number>): Effect.Effect<ReadonlyArray<Option.Option<ProcStat>>> =>
  Effect.map(
    readProcFiles(pids.map((pid) => `/proc/${pid}/stat`), (bytes) => parseStat(bytes.toString("latin1"))),
    (stats) => stats.map(Option.flatten)
  )


/** How many /proc files a sweep reads at once. */
export const sweepConcurrency = 16

/** Whether the process exists and is not a zombie. */
export const isLive = (pid: number): boolean => {
  if (!Number.isInteger(pid) || pid <= 0) return false
  if (hasProc()) return Option.exists(readStat(pid), (stat) => stat.state !== "Z")
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return isErrno(error, "EPERM")
  }
}

const execFile = (file: string, args: ReadonlyArray<string>): Effect.Effect<Option.Option<string>> =>
  Effect.async<Option.Option<string>>((resume) => {
    const child = NodeChildProcess.execFile(file, args, { encoding: "utf8" }, (error, stdout) => {
      resume(Effect.succeed(error === null ? Option.some(stdout) : Option.none()))
    })
    return Effect.sync(() => {
      child.kill("SIGKILL")
    })
  })

const identifyProc = (pid: number): Option.Option<Identity> => {
  const stat = readStat(pid)
  if (Option.isNone(stat) || stat.value.state === "Z") return Option.none()
  return Option.map(readText(`/proc/${pid}/cmdline`), (cmdline) => ({
    source: "proc",
    startTime: stat.value.startTime,
    cmdline
  }))
}

/**
 * The identity of a child just spawned, read in the same tick as the spawn:
 * the child may already have exited, but Node has not reaped it yet, so its
 * /proc entry is still there. A zombie's cmdline is empty: `argv` stands in.
 */
export const snapshotProc = (pid: number, argv: ReadonlyArray<string>): Option.Option<Identity> =>
  Option.map(readStat(pid), (stat) => {
    const cmdline = Option.getOrElse(readText(`/proc/${pid}/cmdline`), () => "")
    return {
      source: "proc",
      startTime: stat.startTime,
      cmdline: digestCmdline(cmdline.length > 0 ? cmdline : argv.map((arg) => `${arg}\0`).join(""))
    }
  })

const identifyPs = (pid: number): Effect.Effect<Option.Option<Identity>> =>
  execFile("ps", ["-o", "lstart=,command=", "-p", String(pid)]).pipe(
    Effect.map(Option.flatMap((out) => {
      // lstart is fixed-width: "Www Mmm dd hh:mm:ss yyyy" (24 characters).
      const line = out.split("\n").find((l) => l.trim().length > 0)
      if (line === undefined) return Option.none()
      const trimmed = line.trimStart()
      return Option.some<Identity>({
        source: "ps",
        startTime: trimmed.slice(0, 24).trim(),
        cmdline: trimmed.slice(24).trim()
      })
    }))
  )

/** The identity of a live, non-zombie process, or none. */
export const identify = (source: IdentitySource, pid: number): Effect.Effect<Option.Option<Identity>> =>
  source === "proc" ? Effect.sync(() => identifyProc(pid)) : identifyPs(pid)

/**
 * The start time of a live, non-zombie process, or none; with /proc, one
 * read of its stat, synchronous like the one at spawn: one small file is
 * answered from memory in microseconds, where an asynchronous read costs
 * each release a trip through the thread pool and a fiber resume.
 */
export const startTimeOf = (source: IdentitySource, pid: number): Effect.Effect<Option.Option<string>> =>
  source === "proc"
    ? Effect.sync(() =>
      Option.flatMap(readStat(pid), (stat) => stat.state === "Z" ? Option.none() : Option.some(stat.startTime))
    )
    : Effect.map(identifyPs(pid), Option.map((identity) => identity.startTime))

/** Either side may hold the command line itself or its digest (journals written before digests hold the bytes). */
export const sameIdentity = (a: Identity, b: Identity): boolean =>
  a.source === b.source && a.startTime === b.startTime &&
  (a.cmdline === b.cmdline || digestCmdline(a.cmdline) === digestCmdline(b.cmdline))

/**
 * Live members of a process group. With /proc, only those started no earlier
 * than `notBefore` count, so a group id that was recycled after the group
 * emptied is not mistaken for ours.
 */
export const groupMembers = (
  source: IdentitySource,
  pgid: number,
  notBefore: Option.Option<string>
): Effect.Effect<ReadonlyArray<number>> => {
  if (source === "ps") {
    return execFile("ps", ["-A", "-o", "pid=,pgid=,stat="]).pipe(
      Effect.map((out) =>
        Option.getOrElse(out, () => "").split("\n").flatMap((line) => {
          const [pid, group, stat] = line.trim().split(/\s+/)
          return group !== undefined && Number(group) === pgid && !(stat ?? "").startsWith("Z")
            ? [Number(pid)]
            : []
        })
      )
    )
  }
  return Effect.flatMap(listPids, (pids) =>
    Effect.map(
      readStats(pids),
      (stats) =>
        pids.filter((_, i) =>
          Option.exists(stats[i]!, ({ pgrp, startTime, state }) =>
            pgrp === pgid && state !== "Z" &&
            (Option.isNone(notBefore) || BigInt(startTime) >= BigInt(notBefore.value)))
        )
    ))
}

/**
 * Sends a signal to a process group. A group that is gone (ESRCH) is not an
 * error; any other failure is returned as its errno code for the caller to log.
 */
export const killGroup = (pgid: number, signal: NodeJS.Signals): string | undefined => {
  try {
    process.kill(-pgid, signal)
    return undefined
  } catch (error) {
    return isErrno(error, "ESRCH") ? undefined : (errnoCode(error) ?? String(error))
  }
}

export const isErrno = (error: unknown, code: string): boolean =>
  typeof error === "object" && error !== null && "code" in error && error.code === code

export const errnoCode = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string"
    ? error.code
    : undefined

/**
 * Polls until `done` holds or `maxMillis` pass. It runs on real timers on
 * purpose: it waits on the kernel, which a TestClock does not drive.
 */
export const waitUntil = (done: Effect.Effect<boolean>, maxMillis: number): Effect.Effect<boolean> =>
  Effect.repeat(done, { schedule: Schedule.spaced(Duration.millis(5)), until: (ok) => ok }).pipe(
    Effect.timeoutTo({ duration: Duration.millis(maxMillis), onTimeout: () => false, onSuccess: () => true }),
    Effect.withClock(Clock.make())
  )

/** Which of `pids` are live (not gone, not zombies), without blocking the event loop where /proc exists. */
export const liveAmong = (pids: ReadonlyArray<number>): Effect.Effect<ReadonlyArray<number>> =>
  hasProc()
    ? Effect.map(
      readStats(pids),
      (stats) => pids.filter((_, i) => Option.exists(stats[i]!, (stat) => stat.state !== "Z"))
    )
    : Effect.sync(() => pids.filter(isLive))

/** Until every pid in `pids` is gone (or a zombie), at most `maxMillis`. */
export const waitGone = (pids: ReadonlyArray<number>, maxMillis: number): Effect.Effect<boolean> =>
  waitUntil(Effect.map(liveAmong(pids), (live) => live.length === 0), maxMillis)
