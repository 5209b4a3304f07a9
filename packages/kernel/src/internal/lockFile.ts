/**
 * The file protocol behind `FileLock`. See the module comment of
 * `FileLock.ts` for why it is race-free; this file only implements it.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import type { PlatformError } from "@effect/platform/Error"
import { Clock, Effect, Option } from "effect"
import * as Crypto from "node:crypto"
import * as procfs from "./procfs.js"

/** One version of a file in the protocol (the lock, or a claim), as read. */
export interface Instance {
  /** The holder; none when the instance is free (a committed "last run" marker). */
  readonly pid: Option.Option<number>
  /** Unique per instance: the nonce we wrote, or the inode's identity for foreign files. */
  readonly id: string
  /** Whether `id` is a nonce we wrote (as opposed to a foreign file's inode identity). */
  readonly ours: boolean
  readonly mtime: Date
}

/** A random name part, unique across processes. */
export const nonce = (): string => Crypto.randomBytes(10).toString("hex")

export const isNotFound = (error: PlatformError): boolean =>
  error._tag === "SystemError" && error.reason === "NotFound"

export const isAlreadyExists = (error: PlatformError): boolean =>
  error._tag === "SystemError" && error.reason === "AlreadyExists"

/** The first line is the holder's pid (empty when free), the second the instance's nonce. */
export const render = (pid: Option.Option<number>, id: string): string =>
  `${Option.match(pid, { onNone: () => "", onSome: String })}\n${id}\n`

const pidLine = /^[1-9][0-9]{0,9}$/
const nonceLine = /^[0-9a-f]{20}$/

export const parse = (content: string): { readonly pid: Option.Option<number>; readonly nonce: Option.Option<string> } => {
  const [first = "", second = ""] = content.split("\n")
  const pid = first.trim()
  const id = second.trim()
  return {
    pid: pidLine.test(pid) ? Option.some(Number(pid)) : Option.none(),
    nonce: nonceLine.test(id) ? Option.some(id) : Option.none()
  }
}

/**
 * Content and metadata from one open file descriptor, so both describe the
 * same inode even while the name is being replaced. None when absent.
 */
export const read = (fs: FileSystem.FileSystem, path: string): Effect.Effect<Option.Option<Instance>, PlatformError> =>
  Effect.scoped(
    Effect.gen(function*() {
      const file = yield* fs.open(path, { flag: "r" })
      const info = yield* file.stat
      const bytes = yield* file.readAlloc(4096)
      const content = Option.match(bytes, { onNone: () => "", onSome: (b) => new TextDecoder().decode(b) })
      const parsed = parse(content)
      const mtime = Option.getOrElse(info.mtime, () => new Date(0))
      return Option.some<Instance>({
        pid: parsed.pid,
        id: Option.getOrElse(
          parsed.nonce,
          () => `i${info.dev}-${Option.getOrElse(info.ino, () => 0)}-${mtime.getTime()}-${info.size}`
        ),
        ours: Option.isSome(parsed.nonce),
        mtime
      })
    })
  ).pipe(Effect.catchIf(isNotFound, () => Effect.succeed(Option.none<Instance>())))

/** Held by a live process, and younger than `staleAfterMs`. */
export const isHeld = (instance: Instance, now: number, staleAfterMs: number): boolean =>
  Option.match(instance.pid, {
    onNone: () => false,
    onSome: (pid) => procfs.isLive(pid) && now - instance.mtime.getTime() < staleAfterMs
  })

/** Writes a complete private file with the given mtime, ready to be linked or renamed into place. */
export const writeTemp = (
  fs: FileSystem.FileSystem,
  file: string,
  content: string,
  mtimeMs: number
): Effect.Effect<void, PlatformError> =>
  fs.writeFileString(file, content, { flag: "wx", mode: 0o600 }).pipe(
    Effect.zipRight(fs.utimes(file, utime(mtimeMs), utime(mtimeMs)))
  )

/**
 * Seconds for `utimes` that read back as exactly `ms` milliseconds. Node
 * hands libuv a double of seconds, which keeps whole microseconds by
 * truncation; `1767225600.123` is stored a hair below and would read back
 * as `…122.999` ms. Half a microsecond more truncates to the intended value.
 */
export const utime = (ms: number): number => ms / 1000 + 5e-7

/** Writes a version to `tmp` and renames it over `file` (an atomic replace). */
export const replace = (
  fs: FileSystem.FileSystem,
  tmp: string,
  file: string,
  content: string,
  mtimeMs: number
): Effect.Effect<void, PlatformError> =>
  writeTemp(fs, tmp, content, mtimeMs).pipe(
    Effect.zipRight(fs.rename(tmp, file)),
    Effect.onError(() => removeIfExists(fs, tmp).pipe(Effect.ignore))
  )

export const removeIfExists = (fs: FileSystem.FileSystem, file: string): Effect.Effect<void, PlatformError> =>
  fs.remove(file).pipe(Effect.catchIf(isNotFound, () => Effect.void))

/** The exclusive right to replace or remove the instance `id` of the lock. */
export interface Claim {
  readonly file: string
  readonly id: string
}

/** A live, fresh claim holder: the caller lost the race for now. */
export interface ClaimBusy {
  readonly _tag: "ClaimBusy"
  readonly pid: number
  readonly since: Date
}

export const claimFile = (lockPath: string, id: string): string => `${lockPath}.${id}.claim`
export const prevFile = (lockPath: string, id: string): string => `${lockPath}.${id}.prev`
export const tempFile = (lockPath: string, id: string): string => `${lockPath}.${id}.tmp`

/**
 * Takes the claim on instance `id` of the lock at `lockPath`. A claim is
 * itself an instance: a dead or stale claim is replaced under a claim on
 * the claim, by the same rule.
 */
export const claim = (
  fs: FileSystem.FileSystem,
  lockPath: string,
  id: string,
  pid: number,
  staleAfterMs: number
): Effect.Effect<Claim, ClaimBusy | PlatformError> =>
  Effect.gen(function*() {
    const file = claimFile(lockPath, id)
    const mine = nonce()
    const tmp = tempFile(lockPath, mine)
    const now = yield* Clock.currentTimeMillis
    yield* writeTemp(fs, tmp, render(Option.some(pid), mine), now)
    return yield* Effect.gen(function*() {
      while (true) {
        const linked = yield* fs.link(tmp, file).pipe(
          Effect.as(true),
          Effect.catchIf(isAlreadyExists, () => Effect.succeed(false))
        )
        if (linked) return { file, id: mine }
        const current = yield* read(fs, file)
        if (Option.isNone(current)) continue
        const other = current.value
        if (isHeld(other, yield* Clock.currentTimeMillis, staleAfterMs) && Option.isSome(other.pid)) {
          return yield* Effect.fail<ClaimBusy>({ _tag: "ClaimBusy", pid: other.pid.value, since: other.mtime })
        }
        // A dead or stale claim: replace it, but only under a claim on it,
        // so that two processes cannot both replace it.
        const inner = yield* claim(fs, lockPath, other.id, pid, staleAfterMs)
        const replaced = yield* Effect.gen(function*() {
          const again = yield* read(fs, file)
          if (Option.isNone(again) || again.value.id !== other.id) return false
          yield* fs.rename(tmp, file)
          return true
        }).pipe(Effect.ensuring(release(fs, inner)))
        if (replaced) return { file, id: mine }
      }
    }).pipe(Effect.ensuring(removeIfExists(fs, tmp).pipe(Effect.ignore)))
  })

/** Gives a claim back, if it is still ours. */
export const release = (fs: FileSystem.FileSystem, held: Claim): Effect.Effect<void> =>
  read(fs, held.file).pipe(
    Effect.flatMap((current) =>
      Option.isSome(current) && current.value.id === held.id ? removeIfExists(fs, held.file) : Effect.void
    ),
    Effect.ignore
  )
