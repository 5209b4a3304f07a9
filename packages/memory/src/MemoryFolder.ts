/**
 * A project's auto-memory folder, where the Claude Code CLI (2.1.332) looks:
 * `<config>/projects/<sanitized cwd>/memory/`, one file per memory and the
 * index `MEMORY.md`, which the CLI puts into every session's context (as a
 * system reminder in the first user message). The index must stay small:
 * each line at most 150 characters, the file at most 25 KB.
 *
 * Every write goes through a temp file and a rename, so the CLI reading
 * concurrently sees the old index or the new one, never a part. Every
 * read-modify-write of the index (`write`, `remove`, `repair`) holds the
 * index lock (`.memory-index-lock`, a kernel `FileLock` shared by
 * processes), so two extractions, a dream and `skein memory add` in one
 * project never lose each other's lines. A holder that died is taken over
 * at once, one that hangs after `indexLockStaleAfter`.
 *
 * @since 0.0.0
 */
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import { AtomicFile, FileLock } from "@skein/kernel"
import { TranscriptLayout } from "@skein/store"
import { Duration, Effect, Either, Option, Schedule, Schema } from "effect"
import * as Path from "node:path"
import * as MemoryFile from "./MemoryFile.js"

/**
 * @since 0.0.0
 */
export const indexName = "MEMORY.md"

/**
 * @since 0.0.0
 */
export interface Limits {
  /** Characters per index line. Default 150. */
  readonly maxLineChars: number
  /** Bytes of `MEMORY.md`. Default 25 KB. */
  readonly maxIndexBytes: number
}

/**
 * @since 0.0.0
 */
export const defaultLimits: Limits = { maxLineChars: 150, maxIndexBytes: 25 * 1024 }

/**
 * The folder of the project whose working directory is `cwd`.
 *
 * @since 0.0.0
 */
export const directory = (configRoot: string, cwd: string): string =>
  Path.join(TranscriptLayout.projectDir(configRoot, cwd), "memory")

/**
 * The file system failed under the memory folder.
 *
 * @since 0.0.0
 */
export class MemoryIoError extends Schema.TaggedError<MemoryIoError>()("MemoryIoError", {
  path: Schema.String,
  operation: Schema.String,
  cause: Schema.Defect
}) {
  override get message(): string {
    return `${this.operation} ${this.path} failed: ${String(this.cause)}`
  }
}

const io = (path: string, operation: string) => (cause: PlatformError) => new MemoryIoError({ path, operation, cause })

const isNotFound = (error: PlatformError): boolean => error._tag === "SystemError" && error.reason === "NotFound"

/**
 * What is in the folder.
 *
 * @since 0.0.0
 */
export interface Snapshot {
  readonly directory: string
  /** Memory files by file name, those that parse. */
  readonly memories: ReadonlyMap<string, MemoryFile.Memory>
  /** `.md` files (other than the index) that do not parse. */
  readonly invalid: ReadonlyArray<MemoryFile.MemoryFormatError>
  /** `MEMORY.md`'s lines; empty if there is none. */
  readonly index: ReadonlyArray<MemoryFile.IndexLine>
  /** `MEMORY.md`'s size in bytes. */
  readonly indexBytes: number
}

const readText = (fs: FileSystem.FileSystem, file: string) =>
  fs.readFileString(file).pipe(
    Effect.asSome,
    Effect.catchIf(isNotFound, () => Effect.succeedNone),
    Effect.mapError(io(file, "read"))
  )

/**
 * Reads the folder; a missing folder is an empty one.
 *
 * @since 0.0.0
 */
export const read = Effect.fn("MemoryFolder.read")(function*(dir: string) {
  const fs = yield* FileSystem.FileSystem
  const names = yield* fs.readDirectory(dir).pipe(
    Effect.catchIf(isNotFound, () => Effect.succeed<Array<string>>([])),
    Effect.mapError(io(dir, "list"))
  )
  const memories = new Map<string, MemoryFile.Memory>()
  const invalid: Array<MemoryFile.MemoryFormatError> = []
  for (const name of names.filter((n) => n.endsWith(".md") && n !== indexName).sort()) {
    const text = yield* readText(fs, Path.join(dir, name))
    if (Option.isNone(text)) continue
    Either.match(MemoryFile.parse(name, text.value), {
      onLeft: (error) => invalid.push(error),
      onRight: (memory) => memories.set(name, memory)
    })
  }
  const indexText = Option.getOrElse(yield* readText(fs, Path.join(dir, indexName)), () => "")
  const snapshot: Snapshot = {
    directory: dir,
    memories,
    invalid,
    index: splitLines(indexText).map(MemoryFile.parseLine),
    indexBytes: Buffer.byteLength(indexText)
  }
  return snapshot
})

const splitLines = (text: string): Array<string> => {
  if (text === "") return []
  const lines = text.split(/\r?\n/)
  return lines.at(-1) === "" ? lines.slice(0, -1) : lines
}

const joinLines = (lines: ReadonlyArray<MemoryFile.IndexLine>): string =>
  lines.length === 0 ? "" : lines.map((line) => line.raw).join("\n") + "\n"

const writeIndex = (dir: string, lines: ReadonlyArray<MemoryFile.IndexLine>) =>
  AtomicFile.write(Path.join(dir, indexName), joinLines(lines), { mode: 0o644 }).pipe(
    Effect.mapError(io(Path.join(dir, indexName), "write"))
  )

const ensureDir = (dir: string) => AtomicFile.makeDirectory(dir).pipe(Effect.mapError(io(dir, "mkdir")))

/**
 * The lock file held over each read-modify-write of `MEMORY.md`.
 *
 * @since 0.0.0
 */
export const indexLockName = ".memory-index-lock"

/** A held index lock older than this may be taken over: a change of the index takes milliseconds. */
export const indexLockStaleAfter: Duration.Duration = Duration.seconds(20)

/** Waits for a busy index lock: short jittered steps, up to past `indexLockStaleAfter` (then the lock is taken over). */
const lockWait = Schedule.exponential("2 millis", 1.5).pipe(
  Schedule.union(Schedule.spaced("50 millis")),
  Schedule.jittered,
  Schedule.upTo(Duration.sum(indexLockStaleAfter, Duration.seconds(10)))
)

/**
 * Runs `change` (a read, a change and a write of the index) holding the
 * index lock; the folder must exist. A failure or an interruption of
 * `change` gives the lock back as it was.
 */
const withIndexLock = <A, R>(dir: string, change: Effect.Effect<A, MemoryIoError, R>) => {
  const lockPath = Path.join(dir, indexLockName)
  const lockFailed = (cause: FileLock.LockHeld | FileLock.LockLost | FileLock.FileLockError) =>
    new MemoryIoError({ path: lockPath, operation: "lock", cause })
  return Effect.scoped(Effect.gen(function*() {
    const lock = yield* FileLock.acquire(lockPath, { staleAfter: indexLockStaleAfter }).pipe(
      Effect.retry({ schedule: lockWait, while: (error) => error._tag === "LockHeld" }),
      Effect.mapError(lockFailed)
    )
    const result = yield* change
    yield* lock.commit.pipe(Effect.mapError(lockFailed))
    return result
  }))
}

/** The index with `f` applied to its current lines, read and written under the index lock. */
const updateIndex = (
  dir: string,
  f: (snapshot: Snapshot) => ReadonlyArray<MemoryFile.IndexLine>
) =>
  withIndexLock(
    dir,
    Effect.gen(function*() {
      const current = yield* read(dir)
      const next = f(current)
      if (joinLines(next) !== joinLines(current.index)) yield* writeIndex(dir, next)
    })
  )

/**
 * @since 0.0.0
 */
export interface WriteOptions {
  /** Defaults to `<name>.md`. */
  readonly file?: string | undefined
  /** The index line's title; the memory's name if omitted. */
  readonly title?: string | undefined
  /** The index line's hook; the memory's description if omitted. */
  readonly hook?: string | undefined
  readonly limits?: Limits | undefined
}

/**
 * Writes a memory and points the index at it: the line for its file is
 * replaced in place, or appended. Returns the file name and the index line.
 *
 * @since 0.0.0
 */
export const write = Effect.fn("MemoryFolder.write")(function*(
  dir: string,
  memory: MemoryFile.Memory,
  options?: WriteOptions
) {
  const file = options?.file ?? MemoryFile.fileName(memory)
  const limits = options?.limits ?? defaultLimits
  yield* ensureDir(dir)
  yield* AtomicFile.write(Path.join(dir, file), MemoryFile.render(memory), { mode: 0o644 }).pipe(
    Effect.mapError(io(Path.join(dir, file), "write"))
  )
  const entry: MemoryFile.Entry = { title: options?.title ?? memory.name, file, hook: options?.hook ?? memory.description }
  const raw = MemoryFile.renderLine(entry, limits.maxLineChars)
  const line: MemoryFile.IndexLine = { _tag: "Entry", entry, raw }
  yield* updateIndex(dir, ({ index: current }) => {
    const at = current.findIndex((l) => l._tag === "Entry" && l.entry.file === file)
    return at === -1
      ? [...current, line]
      : current.flatMap((l, i) => i === at ? [line] : l._tag === "Entry" && l.entry.file === file ? [] : [l])
  })
  return { file, line: raw }
})

/**
 * Deletes a memory and its index line.
 *
 * @since 0.0.0
 */
export const remove = Effect.fn("MemoryFolder.remove")(function*(dir: string, file: string) {
  const fs = yield* FileSystem.FileSystem
  yield* fs.remove(Path.join(dir, file)).pipe(
    Effect.catchIf(isNotFound, () => Effect.void),
    Effect.mapError(io(Path.join(dir, file), "remove"))
  )
  const exists = yield* fs.exists(dir).pipe(Effect.mapError(io(dir, "stat")))
  if (!exists) return
  yield* updateIndex(dir, ({ index }) => index.filter((l) => !(l._tag === "Entry" && l.entry.file === file)))
})

// ---------------------------------------------------------------------------
// Validation and repair
// ---------------------------------------------------------------------------

/**
 * Something wrong with the folder, by what it is.
 *
 * @since 0.0.0
 */
export type Problem =
  | { readonly _tag: "LineTooLong"; readonly line: number; readonly chars: number }
  | { readonly _tag: "IndexTooLarge"; readonly bytes: number }
  | { readonly _tag: "DanglingEntry"; readonly line: number; readonly file: string }
  | { readonly _tag: "DuplicateEntry"; readonly line: number; readonly file: string }
  | { readonly _tag: "Unindexed"; readonly file: string }
  | { readonly _tag: "NotAnEntry"; readonly line: number; readonly text: string }
  | { readonly _tag: "InvalidMemory"; readonly file: string; readonly reason: string }

/**
 * Checks the index against the limits and the files (line numbers from 1).
 *
 * @since 0.0.0
 */
export const validate = (snapshot: Snapshot, limits: Limits = defaultLimits): ReadonlyArray<Problem> => {
  const problems: Array<Problem> = []
  const seen = new Set<string>()
  snapshot.index.forEach((line, i) => {
    const chars = [...line.raw].length
    if (chars > limits.maxLineChars) problems.push({ _tag: "LineTooLong", line: i + 1, chars })
    if (line._tag === "Other") problems.push({ _tag: "NotAnEntry", line: i + 1, text: line.raw })
    if (line._tag !== "Entry") return
    const file = line.entry.file
    if (seen.has(file)) problems.push({ _tag: "DuplicateEntry", line: i + 1, file })
    else if (!snapshot.memories.has(file) && !snapshot.invalid.some((e) => e.file === file)) {
      problems.push({ _tag: "DanglingEntry", line: i + 1, file })
    }
    seen.add(file)
  })
  if (snapshot.indexBytes > limits.maxIndexBytes) problems.push({ _tag: "IndexTooLarge", bytes: snapshot.indexBytes })
  for (const file of snapshot.memories.keys()) if (!seen.has(file)) problems.push({ _tag: "Unindexed", file })
  for (const error of snapshot.invalid) problems.push({ _tag: "InvalidMemory", file: error.file, reason: error.reason })
  return problems
}

/**
 * What `repair` did and what it left for someone to decide.
 *
 * @since 0.0.0
 */
export interface Repair {
  readonly fixed: ReadonlyArray<Problem>
  readonly remaining: ReadonlyArray<Problem>
}

/** The index with what can be fixed mechanically fixed. */
const repairedIndex = (snapshot: Snapshot, limits: Limits): Array<MemoryFile.IndexLine> => {
  const seen = new Set<string>()
  const lines: Array<MemoryFile.IndexLine> = []
  for (const line of snapshot.index) {
    if (line._tag !== "Entry") {
      lines.push(line)
      continue
    }
    const file = line.entry.file
    const exists = snapshot.memories.has(file) || snapshot.invalid.some((e) => e.file === file)
    if (seen.has(file) || !exists) continue
    seen.add(file)
    const raw = [...line.raw].length > limits.maxLineChars ? MemoryFile.renderLine(line.entry, limits.maxLineChars) : line.raw
    lines.push({ ...line, raw })
  }
  for (const [file, memory] of snapshot.memories) {
    if (seen.has(file)) continue
    const entry: MemoryFile.Entry = { title: memory.name, file, hook: memory.description }
    lines.push({ _tag: "Entry", entry, raw: MemoryFile.renderLine(entry, limits.maxLineChars) })
  }
  return lines
}

/**
 * Fixes what needs no judgement: shortens long lines, drops lines that point
 * to missing files or repeat a file, and indexes unindexed memories. An index
 * still over its size, lines that are not pointers, and memory files that do
 * not parse are reported, not touched: deciding what to drop is the dream's.
 * Writes the index only if it changed.
 *
 * @since 0.0.0
 */
export const repair = Effect.fn("MemoryFolder.repair")(function*(dir: string, limits: Limits = defaultLimits) {
  const before = yield* read(dir)
  const problems = validate(before, limits)
  // Take the lock only when there is something to fix; under it, fix what is there by then.
  if (joinLines(repairedIndex(before, limits)) !== joinLines(before.index)) {
    yield* ensureDir(dir)
    yield* updateIndex(dir, (current) => repairedIndex(current, limits))
  }
  const remaining = validate(yield* read(dir), limits)
  // Lines move when others are dropped: a problem is the same one by what it names, not where.
  const key = (p: Problem) => JSON.stringify({ ...p, line: undefined, chars: undefined, bytes: undefined })
  const left = new Set(remaining.map(key))
  const result: Repair = { fixed: problems.filter((p) => !left.has(key(p))), remaining }
  return result
})
