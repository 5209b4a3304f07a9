/**
 * A lock file that is also a "last run" timestamp, shared by OS processes.
 *
 * The file at `path` holds the holder's pid on its first line (empty once
 * released) and a random nonce naming this version of the file on the
 * second. Its mtime is the time of the last run: acquisition stamps it, a
 * commit keeps it, a rollback restores the file that was there before (or
 * deletes the lock if there was none).
 *
 * Why no two processes can both hold it:
 * - The file is never written in place. Every version is written completely
 *   to a private temp file, then put in place with `link` (fails if the name
 *   exists: the only way to create the lock) or `rename` (atomic replace).
 *   Readers see a whole version or none.
 * - Only the holder of the claim on a version may replace or remove it. The
 *   claim on version `N` is the file `<path>.N.claim`, created with `link`,
 *   so at most one process holds it. The claimant re-reads the lock after
 *   winning the claim: if the version is still `N`, nobody else can change it
 *   until the claim is given back (creators only `link`, which fails while it
 *   exists), so the replace that follows acts on `N` and nothing else.
 *   Nonces are never reused, so a late claimant of an old version finds a
 *   different version on re-read and backs off.
 * - Renaming a stale lock away by name would not do: a slow loser could
 *   rename the winner's fresh lock, and putting it back can collide with a
 *   third process that saw the name free.
 * - Taking over a free version (after a commit) and taking over a held one
 *   whose pid is dead or whose mtime is older than `staleAfter` both go
 *   through the claim; so does the holder's own commit or rollback, which
 *   therefore notices (`LockLost`) if it was taken over meanwhile.
 * - A claim left by a crashed process is a version too: it is replaced
 *   under a claim on the claim, by the same rule.
 *
 * The previous version is kept as a hard link `<path>.N.prev` while `N` is
 * held, so a rollback restores it exactly (the same inode, mtime to the
 * nanosecond). Taking over a dead holder's lock inherits its `.prev`: the
 * last successful run, not the crashed one, is what a rollback restores.
 *
 * Limits: staleness by age presumes runs shorter than `staleAfter`; a holder
 * past it may be taken over while alive, and then gets `LockLost`. A crash
 * between steps can leave a `.claim`, `.prev` or `.tmp` file beside the
 * lock; they are inert.
 *
 * @since 0.0.0
 */
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import type { Scope } from "effect"
import { Clock, Duration, Effect, Option, Ref, Schema } from "effect"
import * as internal from "./internal/lockFile.js"

/**
 * Another live process (or fiber) holds the lock and it is not stale, or
 * is in the middle of taking or giving it back (then `pid` is that one's).
 *
 * @since 0.0.0
 */
export class LockHeld extends Schema.TaggedError<LockHeld>()("LockHeld", {
  path: Schema.String,
  pid: Schema.Number,
  since: Schema.DateFromSelf
}) {
  override get message(): string {
    return `${this.path} is held by pid ${this.pid} since ${this.since.toISOString()}`
  }
}

/**
 * The lock was taken over (we outlived `staleAfter`) or removed before our
 * commit or rollback; the file was left as the new owner has it.
 *
 * @since 0.0.0
 */
export class LockLost extends Schema.TaggedError<LockLost>()("LockLost", {
  path: Schema.String
}) {
  override get message(): string {
    return `${this.path} is no longer held by this process`
  }
}

/**
 * The file system failed under the lock.
 *
 * @since 0.0.0
 */
export class FileLockError extends Schema.TaggedError<FileLockError>()("FileLockError", {
  path: Schema.String,
  operation: Schema.String,
  cause: Schema.Defect
}) {
  override get message(): string {
    return `${this.operation} ${this.path} failed: ${String(this.cause)}`
  }
}

/**
 * @since 0.0.0
 */
export interface Options {
  /** A lock older than this may be taken over even if its holder lives. Default 1 hour. */
  readonly staleAfter?: Duration.DurationInput
}

/**
 * A held lock. Closing its scope without `commit` rolls back.
 *
 * @since 0.0.0
 */
export interface FileLock {
  readonly path: string
  readonly pid: number
  /** The mtime this acquisition stamped: the new "last run" once committed. */
  readonly acquiredAt: Date
  /** The "last run" before this acquisition; none if there was no lock. */
  readonly previous: Option.Option<Date>
  /**
   * Success: the lock becomes free (no pid) and keeps `acquiredAt` as its
   * mtime, the time of the last run. Idempotent; a no-op after rollback.
   */
  readonly commit: Effect.Effect<void, LockLost | FileLockError>
  /**
   * Failure: restores the previous file (mtime included), or deletes the
   * lock if there was none. Idempotent; a no-op after commit.
   */
  readonly rollback: Effect.Effect<void, LockLost | FileLockError>
}

/**
 * What is on disk at a lock path.
 *
 * @since 0.0.0
 */
export interface Status {
  /** The holder's pid as written; none once released. It may be dead. */
  readonly pid: Option.Option<number>
  /** The file's mtime: the acquisition time while held, the last run once released. */
  readonly mtime: Date
}

/**
 * The default `staleAfter`.
 *
 * @since 0.0.0
 */
export const defaultStaleAfter: Duration.Duration = Duration.hours(1)

const wrap = (path: string, operation: string) => (cause: PlatformError) =>
  new FileLockError({ path, operation, cause })

/**
 * The lock file's mtime (one stat); none if there is no lock file.
 *
 * @since 0.0.0
 */
export const lastRun = (path: string): Effect.Effect<Option.Option<Date>, FileLockError, FileSystem.FileSystem> =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.stat(path)).pipe(
    Effect.map((info) => info.mtime),
    Effect.catchIf(internal.isNotFound, () => Effect.succeedNone),
    Effect.mapError(wrap(path, "stat"))
  )

/**
 * Reads the lock without touching it.
 *
 * @since 0.0.0
 */
export const status = (path: string): Effect.Effect<Option.Option<Status>, FileLockError, FileSystem.FileSystem> =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => internal.read(fs, path)).pipe(
    Effect.map(Option.map((instance): Status => ({ pid: instance.pid, mtime: instance.mtime }))),
    Effect.mapError(wrap(path, "read"))
  )

interface Installed {
  readonly nonce: string
  readonly acquiredAtMs: number
  readonly previous: Option.Option<Date>
}

/** One attempt; none when the lock changed under us and the caller should look again. */
const attempt = (
  fs: FileSystem.FileSystem,
  path: string,
  pid: number,
  staleAfterMs: number
): Effect.Effect<Option.Option<Installed>, LockHeld | PlatformError> =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const nonce = internal.nonce()
    const tmp = internal.tempFile(path, nonce)
    const current = yield* internal.read(fs, path)
    if (Option.isNone(current)) {
      yield* internal.writeTemp(fs, tmp, internal.render(Option.some(pid), nonce), now)
      const created = yield* fs.link(tmp, path).pipe(
        Effect.as(true),
        Effect.catchIf(internal.isAlreadyExists, () => Effect.succeed(false)),
        Effect.ensuring(internal.removeIfExists(fs, tmp).pipe(Effect.ignore))
      )
      return created ? Option.some({ nonce, acquiredAtMs: now, previous: Option.none() }) : Option.none()
    }
    const found = current.value
    if (internal.isHeld(found, now, staleAfterMs) && Option.isSome(found.pid)) {
      return yield* new LockHeld({ path, pid: found.pid.value, since: found.mtime })
    }
    const claim = yield* internal.claim(fs, path, found.id, pid, staleAfterMs).pipe(
      Effect.catchTag("ClaimBusy", (busy) => new LockHeld({ path, pid: busy.pid, since: busy.since }))
    )
    return yield* Effect.gen(function*() {
      const again = yield* internal.read(fs, path)
      if (Option.isNone(again) || again.value.id !== found.id) return Option.none()
      // `found` is ours to replace until the claim is given back.
      const prev = internal.prevFile(path, nonce)
      const inherited = found.ours && Option.isSome(found.pid)
        ? internal.prevFile(path, found.id) // a stale holder's own previous version
        : path // a free version (or a foreign file) is itself the previous version
      const kept = yield* fs.link(inherited, prev).pipe(
        Effect.as(true),
        Effect.catchIf(internal.isNotFound, () => Effect.succeed(false))
      )
      const previous = kept ? yield* fs.stat(prev).pipe(Effect.map((info) => info.mtime)) : Option.none<Date>()
      yield* internal.replace(fs, tmp, path, internal.render(Option.some(pid), nonce), now).pipe(
        Effect.onError(() => internal.removeIfExists(fs, prev).pipe(Effect.ignore))
      )
      if (inherited !== path) yield* internal.removeIfExists(fs, inherited)
      return Option.some({ nonce, acquiredAtMs: now, previous })
    }).pipe(Effect.ensuring(internal.release(fs, claim)))
  })

/** Runs `f` on our version under its claim; `LockLost` if it is no longer ours. */
const finish = (
  fs: FileSystem.FileSystem,
  path: string,
  pid: number,
  nonce: string,
  staleAfterMs: number,
  f: Effect.Effect<void, PlatformError>
): Effect.Effect<void, LockLost | PlatformError> =>
  Effect.gen(function*() {
    const claim = yield* internal.claim(fs, path, nonce, pid, staleAfterMs).pipe(
      Effect.catchTag("ClaimBusy", () => new LockLost({ path }))
    )
    yield* Effect.gen(function*() {
      const current = yield* internal.read(fs, path)
      if (Option.isNone(current) || current.value.id !== nonce) return yield* new LockLost({ path })
      yield* f
    }).pipe(Effect.ensuring(internal.release(fs, claim)))
  })

/**
 * Acquires the lock at `path` for the current scope. Fails with `LockHeld`
 * when a live process holds a lock younger than `staleAfter`; takes over a
 * free lock, a dead holder's, or a stale one. Closing the scope without
 * `commit` (failure, interruption) rolls back.
 *
 * @since 0.0.0
 */
export const acquire: (
  path: string,
  options?: Options
) => Effect.Effect<FileLock, LockHeld | FileLockError, FileSystem.FileSystem | Scope.Scope> = Effect.fn(
  "FileLock.acquire"
)(function*(path: string, options?: Options) {
  const fs = yield* FileSystem.FileSystem
  const pid = process.pid
  const staleAfterMs = Duration.toMillis(options?.staleAfter ?? defaultStaleAfter)
  yield* Effect.annotateCurrentSpan({ path, pid })
  const acquireOnce = attempt(fs, path, pid, staleAfterMs).pipe(Effect.mapError((error) =>
    error._tag === "LockHeld" ? error : wrap(path, "acquire")(error)
  ))
  const acquired = Effect.gen(function*() {
    // Each miss means another process changed the lock meanwhile: look again.
    while (true) {
      const installed = yield* acquireOnce
      if (Option.isSome(installed)) return installed.value
    }
  })
  const make = (installed: Installed) =>
    Effect.map(Ref.make(false), (done): FileLock => {
      const once = (operation: string, f: Effect.Effect<void, PlatformError>) =>
        Ref.getAndSet(done, true).pipe(
          Effect.flatMap((already) =>
            already ? Effect.void : finish(fs, path, pid, installed.nonce, staleAfterMs, f)
          ),
          Effect.mapError((error) => error._tag === "LockLost" ? error : wrap(path, operation)(error)),
          Effect.uninterruptible
        )
      const prev = internal.prevFile(path, installed.nonce)
      return {
        path,
        pid,
        acquiredAt: new Date(installed.acquiredAtMs),
        previous: installed.previous,
        commit: once(
          "commit",
          Effect.gen(function*() {
            const free = internal.render(Option.none(), internal.nonce())
            yield* internal.replace(fs, internal.tempFile(path, internal.nonce()), path, free, installed.acquiredAtMs)
            yield* internal.removeIfExists(fs, prev)
          }).pipe(Effect.withSpan("FileLock.commit"))
        ),
        rollback: once(
          "rollback",
          fs.rename(prev, path).pipe(
            Effect.catchIf(internal.isNotFound, () => fs.remove(path)),
            Effect.withSpan("FileLock.rollback")
          )
        )
      }
    })
  return yield* Effect.acquireRelease(
    Effect.flatMap(acquired, make),
    (lock) =>
      lock.rollback.pipe(
        Effect.catchAll((error) => Effect.logWarning("FileLock: rollback on scope close failed", error))
      )
  )
})
