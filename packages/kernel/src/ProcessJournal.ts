/**
 * A record of live child process groups, so that the next start of a runtime
 * that died without running its finalizers (SIGKILL, OOM, power loss) can kill
 * the orphans it left behind.
 *
 * The journal is one small JSON file. Several runtimes may share it: each
 * change is a read-modify-write under a `FileLock` (`<file>.lock`), so two
 * runtimes changing it in the same instant never lose each other's entries,
 * and reaping skips entries whose owner is still alive. The new version goes
 * through `AtomicFile.write` (temp file, fsync, rename, fsync of the folder),
 * so a crash leaves the old journal or the new one.
 *
 * Identity: a pid is killed only if it is still the program that was spawned.
 * On Linux that is checked with /proc (field 22 of `stat`, the start time, and
 * `cmdline`, kept as a digest). Without /proc (macOS, the BSDs) the same check runs on
 * `ps -o lstart=,command=`, whose start time has one-second resolution.
 *
 * Escapees: descendants that left the group (the CLI runs Bash commands under
 * setsid) are found by the child's environment marker (`SKEIN_PROCESS`,
 * Linux only), which each entry records. A process still carrying the marker
 * is ours whatever became of the group's leader.
 *
 * @since 0.0.0
 */
import { FileSystem } from "@effect/platform/FileSystem"
import { Path } from "@effect/platform/Path"
import { Clock, Context, Duration, Effect, Layer, Option, Ref, Schedule, Schema } from "effect"
import * as AtomicFile from "./AtomicFile.js"
import * as FileLock from "./FileLock.js"
import * as Batcher from "./internal/batcher.js"
import * as Marker from "./internal/marker.js"
import * as procfs from "./internal/procfs.js"

// ---------------------------------------------------------------------------
// Models
// ---------------------------------------------------------------------------

/**
 * What makes a pid the same program: its start time and command line, read
 * from one source.
 *
 * @since 0.0.0
 */
export const Identity = Schema.Struct({
  source: Schema.Literal("proc", "ps"),
  startTime: Schema.String,
  cmdline: Schema.String
})

/**
 * @since 0.0.0
 */
export interface Identity extends Schema.Schema.Type<typeof Identity> {}

/**
 * One live child process group.
 *
 * @since 0.0.0
 */
export const Entry = Schema.Struct({
  pid: Schema.Number,
  pgid: Schema.Number,
  identity: Identity,
  command: Schema.String,
  label: Schema.optional(Schema.String),
  /** The child's `SKEIN_PROCESS` marker, inherited by all it starts. */
  marker: Schema.optional(Schema.String),
  /** The runtime that spawned it. */
  owner: Schema.Struct({
    pid: Schema.Number,
    identity: Schema.NullOr(Identity)
  }),
  spawnedAt: Schema.String
})

/**
 * @since 0.0.0
 */
export interface Entry extends Schema.Schema.Type<typeof Entry> {}

/**
 * The file: entries are decoded one by one, so one bad entry does not lose
 * the others.
 */
const JournalFile = Schema.parseJson(Schema.Struct({
  version: Schema.Literal(1),
  entries: Schema.Array(Schema.Unknown)
}))

const decodeEntry = Schema.decodeUnknownOption(Entry)

/**
 * A child the host asks the journal to remember.
 *
 * @since 0.0.0
 */
export interface Child {
  readonly pid: number
  readonly pgid: number
  readonly identity: Identity
  readonly command: string
  readonly label?: string | undefined
  readonly marker?: string | undefined
}

/**
 * What `reap` did with each entry whose owner is gone.
 *
 * @since 0.0.0
 */
export interface ReapReport {
  /** Entries whose processes were killed: live group members and marked escapees. */
  readonly reaped: ReadonlyArray<{ readonly entry: Entry; readonly members: ReadonlyArray<number> }>
  /** Entries dropped without a kill: nothing of theirs was alive, or the pid was reused. */
  readonly dropped: ReadonlyArray<{ readonly entry: Entry; readonly reason: "gone" | "pid reused" }>
  /** Entries of runtimes that are still alive, left alone. */
  readonly kept: ReadonlyArray<Entry>
}

// ---------------------------------------------------------------------------
// Service
// ---------------------------------------------------------------------------

/**
 * @since 0.0.0
 */
export class ProcessJournal extends Context.Tag("@skein/kernel/ProcessJournal")<ProcessJournal, {
  /** Where identities come from on this system. */
  readonly source: Identity["source"]
  readonly record: (child: Child) => Effect.Effect<void>
  readonly remove: (pid: number) => Effect.Effect<void>
  readonly entries: Effect.Effect<ReadonlyArray<Entry>>
  /** Kills the verified orphans of dead owners and rewrites the journal without them. */
  readonly reap: Effect.Effect<ReapReport>
}>() {}

/**
 * Holds the whole list of entries.
 *
 * @since 0.0.0
 */
export interface Storage {
  readonly read: Effect.Effect<ReadonlyArray<Entry>>
  /**
   * Replaces the entries with `f` of the current ones, as one step: no other
   * runtime sharing the storage changes it between the read and the write.
   */
  readonly update: (f: (entries: ReadonlyArray<Entry>) => ReadonlyArray<Entry>) => Effect.Effect<void>
  /**
   * Whether `update` is an atomic step in memory: the journal then applies
   * each change at once instead of batching it behind a lock, which only
   * pays for itself when a change costs a locked, fsync'd file write.
   */
  readonly immediate?: boolean | undefined
}

/**
 * @since 0.0.0
 */
export interface MakeOptions {
  /** Defaults to /proc when present, else `ps`. */
  readonly source?: Identity["source"] | undefined
}

/**
 * Its scope holds the writer that batches changes.
 *
 * @since 0.0.0
 */
export const make = Effect.fnUntraced(function*(storage: Storage, options?: MakeOptions) {
  const source = options?.source ?? procfs.defaultSource()
  const owner = {
    pid: process.pid,
    identity: Option.getOrNull(yield* procfs.identify(source, process.pid))
  }
  const lock = yield* Effect.makeSemaphore(1)
  // Changes that arrive together (the children of one scope close) share
  // one read-modify-write: one lock, one fsync'd file. A store in memory
  // changes at once: a batch there would cost each spawn a round trip
  // through the batcher's fiber for nothing.
  const update = storage.immediate === true
    ? storage.update
    : (yield* Batcher.make((fs: ReadonlyArray<(entries: ReadonlyArray<Entry>) => ReadonlyArray<Entry>>) =>
      Effect.as(
        lock.withPermits(1)(storage.update((entries) => fs.reduce((acc, f) => f(acc), entries))),
        fs.map(() => undefined)
      )
    )).submit

  const ownerAlive = (entry: Entry): Effect.Effect<boolean> => {
    const recorded = entry.owner.identity
    if (recorded === null) return Effect.sync(() => procfs.isLive(entry.owner.pid))
    return Effect.map(
      procfs.identify(recorded.source, entry.owner.pid),
      Option.exists((now) => procfs.sameIdentity(now, recorded))
    )
  }

  const reapEntry = Effect.fnUntraced(function*(entry: Entry) {
    const now = yield* procfs.identify(entry.identity.source, entry.pid)
    const reused = Option.isSome(now) && !procfs.sameIdentity(now.value, entry.identity)
    // The leader may be gone while its group lives on (background children).
    const members = reused ? [] : yield* procfs.groupMembers(
      entry.identity.source,
      entry.pgid,
      entry.identity.source === "proc" ? Option.some(entry.identity.startTime) : Option.none()
    )
    if (members.length > 0) {
      const failure = procfs.killGroup(entry.pgid, "SIGKILL")
      if (failure !== undefined) {
        yield* Effect.logWarning(`ProcessJournal: SIGKILL to group ${entry.pgid} failed: ${failure}`)
      }
    }
    // Escapees from the group (setsid) still carry the marker, even when the
    // group is gone or its pid now runs another program.
    const marked = entry.marker === undefined ? [] : yield* Marker.killMarked(entry.marker)
    if (members.length === 0 && marked.length === 0) {
      return { _tag: "dropped", reason: reused ? "pid reused" : "gone" } as const
    }
    yield* procfs.waitGone(members, 2_000)
    return { _tag: "reaped", members: Array.from(new Set([...members, ...marked])) } as const
  })

  const reap = lock.withPermits(1)(Effect.gen(function*() {
    const entries = yield* storage.read
    const reaped: Array<ReapReport["reaped"][number]> = []
    const dropped: Array<ReapReport["dropped"][number]> = []
    const kept: Array<Entry> = []
    for (const entry of entries) {
      if (yield* ownerAlive(entry)) {
        kept.push(entry)
        continue
      }
      const outcome = yield* reapEntry(entry)
      if (outcome._tag === "reaped") {
        reaped.push({ entry, members: outcome.members })
        yield* Effect.logInfo(
          `ProcessJournal: reaped orphan group ${entry.pgid} (${entry.command}) of dead runtime ${entry.owner.pid}`
        ).pipe(Effect.annotateLogs({ pgid: entry.pgid, members: outcome.members.join(",") }))
      } else {
        dropped.push({ entry, reason: outcome.reason })
      }
    }
    if (reaped.length > 0 || dropped.length > 0) {
      // Re-read: entries of live runtimes may have changed meanwhile.
      const done = new Set([...reaped.map((r) => r.entry), ...dropped.map((d) => d.entry)].map(key))
      yield* storage.update((now) => now.filter((e) => !done.has(key(e))))
    }
    if (reaped.length > 0 || dropped.length > 0) {
      yield* Effect.logInfo(
        `ProcessJournal: reaped ${reaped.length} orphan group(s), dropped ${dropped.length} stale entr(ies)`
      )
    }
    return { reaped, dropped, kept } satisfies ReapReport
  })).pipe(Effect.withSpan("ProcessJournal.reap"))

  return ProcessJournal.of({
    source,
    record: (child) =>
      update((entries) => [
        ...entries.filter((e) => e.pid !== child.pid),
        {
          pid: child.pid,
          pgid: child.pgid,
          identity: child.identity,
          command: child.command,
          ...(child.label !== undefined ? { label: child.label } : {}),
          ...(child.marker !== undefined ? { marker: child.marker } : {}),
          owner,
          spawnedAt: new Date().toISOString()
        }
      ]),
    remove: (pid) => update((entries) => entries.filter((e) => !(e.pid === pid && e.owner.pid === owner.pid))),
    entries: storage.read,
    reap
  })
})

const key = (entry: Entry): string => `${entry.owner.pid}/${entry.pid}/${entry.identity.startTime}`

/**
 * How long another runtime may hold the journal's lock before it counts as
 * stuck and is taken over. A change holds it for a few file operations.
 */
const lockStaleAfter = Duration.seconds(10)

/** Waits for the lock while another runtime holds it: short, jittered tries. */
const lockRetry = Schedule.exponential(Duration.millis(1), 1.5).pipe(
  Schedule.union(Schedule.spaced(Duration.millis(20))),
  Schedule.jittered
)

/**
 * Storage in one JSON file. A change takes the file lock `<file>.lock`,
 * re-reads the file and writes the result through `AtomicFile.write`. IO
 * failures are logged, never raised: a spawn must not fail because its
 * journal did.
 *
 * @since 0.0.0
 */
export const fileStorage = (file: string): Effect.Effect<Storage, never, FileSystem | Path> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem
    const path = yield* Path
    const read = Effect.gen(function*() {
      const text = yield* fs.readFileString(file).pipe(
        Effect.catchTag("SystemError", (error) =>
          error.reason === "NotFound" ? Effect.succeed(undefined) : Effect.fail(error))
      )
      if (text === undefined || text.trim() === "") return []
      const decoded = yield* Schema.decode(JournalFile)(text)
      const entries: Array<Entry> = []
      for (const raw of decoded.entries) {
        const entry = decodeEntry(raw)
        if (Option.isSome(entry)) entries.push(entry.value)
        else yield* Effect.logWarning(`ProcessJournal: dropped an undecodable entry in ${file}`)
      }
      return entries
    }).pipe(
      Effect.catchAll((error) =>
        Effect.as(Effect.logWarning(`ProcessJournal: cannot read ${file}: ${error.message}`), [])
      )
    )
    const exclusive = FileLock.acquire(`${file}.lock`, { staleAfter: lockStaleAfter }).pipe(
      Effect.retry({ schedule: lockRetry, while: (error) => error._tag === "LockHeld" })
    )
    const update = (f: (entries: ReadonlyArray<Entry>) => ReadonlyArray<Entry>) =>
      Effect.scoped(Effect.gen(function*() {
        yield* AtomicFile.makeDirectory(path.dirname(file))
        yield* exclusive
        const entries = f(yield* read)
        yield* AtomicFile.write(file, JSON.stringify({ version: 1, entries }, null, 2) + "\n")
      })).pipe(
        Effect.provideService(FileSystem, fs),
        // The lock's stamps and waits are real time, whatever clock the caller runs on.
        Effect.withClock(Clock.make()),
        Effect.catchAll((error) => Effect.logWarning(`ProcessJournal: cannot write ${file}: ${error.message}`))
      )
    return { read, update }
  })

/**
 * Storage in memory: nothing survives the runtime, so nothing is reaped.
 *
 * @since 0.0.0
 */
export const memoryStorage: Effect.Effect<Storage> = Effect.map(
  Ref.make<ReadonlyArray<Entry>>([]),
  (ref) => ({ read: Ref.get(ref), update: (f) => Ref.update(ref, f), immediate: true })
)

/**
 * A journal in the file at `path`.
 *
 * @since 0.0.0
 */
export const layer = (
  options: MakeOptions & { readonly path: string }
): Layer.Layer<ProcessJournal, never, FileSystem | Path> =>
  Layer.scoped(ProcessJournal, Effect.flatMap(fileStorage(options.path), (storage) => make(storage, options)))

/**
 * A journal in memory, for embedders and tests that do not need reaping.
 *
 * @since 0.0.0
 */
export const layerMemory: Layer.Layer<ProcessJournal> = Layer.scoped(
  ProcessJournal,
  Effect.flatMap(memoryStorage, (storage) => make(storage))
)
