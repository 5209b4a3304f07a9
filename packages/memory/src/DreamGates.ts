/**
 * When autoDream runs: three gates, cheapest first (the kernel's `Gate`).
 *
 * 1. time: one `stat` of `<memory>/.consolidate-lock`; its mtime is the last
 *    consolidation. Most turns stop here.
 * 2. activity: a scan of the project's transcripts, at most once per
 *    `scanEvery`: were at least `minSessions` sessions other than the current
 *    one modified since the last consolidation?
 * 3. lock: the kernel's `FileLock` on the same file (the holder's pid inside);
 *    a dead holder's lock, or one older than `staleLock`, is taken over.
 *
 * The time gate reads the lock before the lock gate takes it, so another
 * process may consolidate in between and free the lock with a fresh mtime.
 * The lock gate therefore checks the time again under the lock, against the
 * last run the lock itself reports, and gives the lock back if that run is
 * recent: one dream per window, never two.
 *
 * @since 0.0.0
 */
import type { PlatformError } from "@effect/platform/Error"
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import { FileLock, Gate } from "@skein/kernel"
import type { SessionIndex } from "@skein/store"
import { Clock, Duration, Effect, Option, type Scope } from "effect"
import * as NodePath from "node:path"

/**
 * @since 0.0.0
 */
export interface Config {
  /** Since the last consolidation. Default 24 hours. */
  readonly minInterval: Duration.DurationInput
  /** Other sessions modified since. Default 5. */
  readonly minSessions: number
  /** How often the activity scan may run. Default 10 minutes. */
  readonly scanEvery: Duration.DurationInput
  /** A lock this old may be taken over from a live holder. Default 1 hour. */
  readonly staleLock: Duration.DurationInput
}

/**
 * @since 0.0.0
 */
export const defaultConfig: Config = {
  minInterval: Duration.hours(24),
  minSessions: 5,
  scanEvery: Duration.minutes(10),
  staleLock: Duration.hours(1)
}

/**
 * @since 0.0.0
 */
export const lockName = ".consolidate-lock"

/**
 * @since 0.0.0
 */
export const lockPath = (memoryDir: string): string => NodePath.join(memoryDir, lockName)

/**
 * @since 0.0.0
 */
export interface Options {
  readonly memoryDir: string
  /** The project's folder of transcripts (`<config>/projects/<project>`). */
  readonly projectDir: string
  /** Not counted as activity; a function when the id is learned later (a session's first turn). */
  readonly currentSessionId?: string | (() => string | undefined) | undefined
  /**
   * With the SessionIndex, the activity scan counts only real sessions: the
   * memory workers' own forks (marked as workers) are not activity, else
   * every extraction would count towards the next dream. Without it, every
   * `.jsonl` of the project counts.
   */
  readonly sessions?: SessionIndex.SessionIndex["Type"] | undefined
  readonly config?: Partial<Config> | undefined
}

/**
 * @since 0.0.0
 */
export type Error = FileLock.FileLockError | PlatformError | SessionIndex.SessionIndexError

/**
 * The gates of one session's trigger. Make them once and evaluate them after
 * every turn: the activity gate remembers its last scan.
 *
 * @since 0.0.0
 */
export interface DreamGates {
  readonly lockPath: string
  readonly config: Config
  readonly time: Gate.Gate<void, FileLock.FileLockError, FileSystem.FileSystem>
  readonly activity: Gate.Gate<number, PlatformError | SessionIndex.SessionIndexError, FileSystem.FileSystem | Path.Path>
  readonly lock: Gate.Gate<FileLock.FileLock, FileLock.FileLockError, FileSystem.FileSystem | Scope.Scope>
  /** Passes with the lock held in the current scope: commit it after a good run, or let the scope roll it back. */
  readonly evaluate: Effect.Effect<
    Gate.Outcome<readonly [void, number, FileLock.FileLock]>,
    Error,
    FileSystem.FileSystem | Path.Path | Scope.Scope
  >
}

/**
 * The lock gate with the time checked again under the lock.
 *
 * @since 0.0.0
 */
export const lockGate = (path: string, config: Config): Gate.Gate<FileLock.FileLock, FileLock.FileLockError, FileSystem.FileSystem | Scope.Scope> => {
  const inner = Gate.lock({ path, staleAfter: config.staleLock })
  return Gate.make(
    inner.name,
    Effect.gen(function*() {
      const decision = yield* inner.check
      if (decision._tag === "Stop") return decision
      const held = decision.value
      const now = yield* Clock.currentTimeMillis
      const minimum = Duration.toMillis(config.minInterval)
      if (Option.isSome(held.previous) && now - held.previous.value.getTime() < minimum) {
        // Lost means someone else owns it now: the answer is no either way.
        yield* held.rollback.pipe(Effect.catchTag("LockLost", () => Effect.void))
        return Gate.stop(`consolidated at ${held.previous.value.toISOString()} by another process meanwhile`)
      }
      return Gate.pass(held)
    })
  )
}

/** The activity gate over the SessionIndex: sessions, not worker forks, modified after the lock's mtime. */
const indexedActivity = (
  sessions: SessionIndex.SessionIndex["Type"],
  projectDir: string,
  lock: string,
  currentSessionId: () => string | undefined,
  config: Config
) =>
  Gate.throttle(
    Gate.make(
      "activity",
      Effect.gen(function*() {
        const last = yield* FileLock.lastRun(lock).pipe(Effect.orElseSucceed(() => Option.none<Date>()))
        const since = Option.match(last, { onNone: () => 0, onSome: (d) => d.getTime() })
        const listed = yield* sessions.list({ projectDir })
        const count = listed.filter((s) => s.sessionId !== currentSessionId() && s.mtime.getTime() > since).length
        return count >= config.minSessions
          ? Gate.pass(count)
          : Gate.stop(`${count} sessions modified since the last run, fewer than ${config.minSessions}`)
      })
    ),
    config.scanEvery
  )

/**
 * @since 0.0.0
 */
export const make = (options: Options): Effect.Effect<DreamGates> =>
  Effect.gen(function*() {
    const config: Config = { ...defaultConfig, ...options.config }
    const path = lockPath(options.memoryDir)
    const given = options.currentSessionId
    const currentId = typeof given === "function" ? given : () => given
    const time = Gate.elapsed({ path, minimum: config.minInterval })
    const activity = options.sessions === undefined
      ? yield* Gate.activity({
        directory: options.projectDir,
        since: path,
        atLeast: config.minSessions,
        scanEvery: config.scanEvery,
        include: (name) => name.endsWith(".jsonl") && name !== `${currentId()}.jsonl`
      })
      : yield* indexedActivity(options.sessions, options.projectDir, path, currentId, config)
    const lock = lockGate(path, config)
    const evaluate = Gate.evaluate([time, activity, lock] as const).pipe(
      Effect.withSpan("DreamGates.evaluate", { attributes: { lock: path } })
    )
    return { lockPath: path, config, time, activity, lock, evaluate }
  })
