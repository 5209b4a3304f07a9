/**
 * Writes that survive a crash of the machine, not only of the process.
 *
 * A rename or a new name is an update of the folder, not of the file: until
 * the folder itself is fsynced, a power loss can forget that the name exists
 * even though the file's bytes were synced. And a rename of a file whose own
 * bytes were never synced can leave an empty or half-written file under the
 * final name. So every write here follows one order:
 * 1. write the content to a private temp file beside the target, fsync it;
 * 2. `rename` it over the target (or `link` it, to never replace one);
 * 3. fsync the folder.
 *
 * `makeDirectory` creates missing folders and fsyncs the parent of each one
 * it created, so that a new folder does not vanish with its files.
 *
 * Folders cannot be opened for fsync on Windows; there the folder step is
 * skipped.
 *
 * @since 0.0.0
 */
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import * as Path from "node:path"

const isNotFound = (error: PlatformError): boolean => error._tag === "SystemError" && error.reason === "NotFound"

const encoder = new TextEncoder()

/**
 * Fsyncs a folder, so that the names created, renamed or removed in it so
 * far are on disk.
 *
 * @since 0.0.0
 */
export const syncDirectory = (dir: string): Effect.Effect<void, PlatformError, FileSystem.FileSystem> =>
  process.platform === "win32"
    ? Effect.void
    : Effect.flatMap(FileSystem.FileSystem, (fs) =>
      Effect.scoped(Effect.flatMap(fs.open(dir, { flag: "r" }), (handle) => handle.sync)))

/**
 * Creates `dir` and its missing parents (with `mode`, default 0700), then
 * fsyncs the parent of every folder it created. A folder that already
 * exists is left as it is.
 *
 * @since 0.0.0
 */
export const makeDirectory = (
  dir: string,
  options?: { readonly mode?: number | undefined }
): Effect.Effect<void, PlatformError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const missing: Array<string> = []
    let current = Path.resolve(dir)
    while (!(yield* fs.exists(current))) {
      missing.push(current)
      const parent = Path.dirname(current)
      if (parent === current) break
      current = parent
    }
    if (missing.length === 0) return
    yield* fs.makeDirectory(dir, { recursive: true, mode: options?.mode ?? 0o700 })
    // Deepest first: each parent records the name of the folder below it.
    for (const created of missing) yield* syncDirectory(Path.dirname(created))
  })

/**
 * @since 0.0.0
 */
export interface WriteOptions {
  /** The file's mode. Default 0600. */
  readonly mode?: number | undefined
  /**
   * Replace an existing file (`rename`, the default), or fail with the
   * platform's `AlreadyExists` if the name is taken (`link`).
   */
  readonly replace?: boolean | undefined
}

/**
 * The temp file a write of `path` goes through: beside it (a rename stays
 * on one file system), and unique across processes and fibers.
 *
 * @since 0.0.0
 */
export const tempPath = (path: string): string =>
  `${path}.${process.pid}.${Crypto.randomBytes(6).toString("hex")}.tmp`

/**
 * Writes `data` to `path` so that a reader, or the next boot, sees the old
 * content or the new, never a part. The folder must exist (see
 * `makeDirectory`). On failure the temp file is removed.
 *
 * @since 0.0.0
 */
export const write = (
  path: string,
  data: string | Uint8Array,
  options?: WriteOptions
): Effect.Effect<void, PlatformError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const temp = tempPath(path)
    const bytes = typeof data === "string" ? encoder.encode(data) : data
    yield* Effect.gen(function*() {
      yield* Effect.scoped(Effect.gen(function*() {
        const file = yield* fs.open(temp, { flag: "wx", mode: options?.mode ?? 0o600 })
        yield* file.writeAll(bytes)
        yield* file.sync
      }))
      if (options?.replace === false) {
        yield* fs.link(temp, path)
        yield* fs.remove(temp)
      } else {
        yield* fs.rename(temp, path)
      }
    }).pipe(
      Effect.onError(() => fs.remove(temp).pipe(Effect.catchIf(isNotFound, () => Effect.void), Effect.ignore))
    )
    yield* syncDirectory(Path.dirname(path))
  })
