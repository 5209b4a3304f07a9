/**
 * The files behind the TaskManager: one JSON record and one output file per
 * task under `<root>/tasks`, files 0600 and the folder 0700.
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import type { PlatformError } from "@effect/platform/Error"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Task from "../Task.js"
import { randomSuffix } from "./taskId.js"
import { completePrefixLength } from "./utf8.js"

export const fileMode = 0o600
export const folderMode = 0o700

/** A record file that could not be read or decoded; reported, never fatal. */
export interface CorruptRecord {
  readonly file: string
  readonly message: string
}

export interface OutputChunk {
  /** The text appended since `offset`, ending on a character boundary. */
  readonly text: string
  /** Where the next read starts, in bytes. */
  readonly nextOffset: number
}

const tempSuffix = ".tmp"
const encoder = new TextEncoder()

export interface Store {
  readonly dir: string
  readonly recordPath: (id: string) => string
  readonly outputPath: (id: string) => string
  readonly ensureDir: Effect.Effect<void, PlatformError>
  readonly write: (record: Task.TaskRecord) => Effect.Effect<void, PlatformError>
  readonly load: Effect.Effect<
    { readonly records: ReadonlyArray<Task.TaskRecord>; readonly corrupt: ReadonlyArray<CorruptRecord> },
    PlatformError
  >
  readonly createOutput: (file: string) => Effect.Effect<void, PlatformError>
  readonly append: (file: string, text: string) => Effect.Effect<void, PlatformError>
  readonly read: (
    file: string,
    offset: number,
    options: { readonly maxBytes: number; readonly final: boolean }
  ) => Effect.Effect<OutputChunk, PlatformError>
}

export const make = (fs: FileSystem.FileSystem, path: Path.Path, root: string): Store => {
  const dir = path.join(root, "tasks")
  const recordPath = (id: string) => path.join(dir, `${id}.json`)
  const outputPath = (id: string) => path.join(dir, `${id}.output`)

  const ensureDir = Effect.gen(function*() {
    yield* fs.makeDirectory(root, { recursive: true, mode: folderMode })
    yield* fs.makeDirectory(dir, { recursive: true, mode: folderMode })
    // `mode` applies only to folders mkdir creates; an older folder is tightened too.
    yield* fs.chmod(dir, folderMode)
  })

  /** Temp file + fsync + rename: a reader sees the old record or the new one, never half of one. */
  const write = (record: Task.TaskRecord) =>
    Effect.gen(function*() {
      const text = yield* Either.match(Task.encodeRecordJson(record), {
        // The record type is the schema's own type, so encoding cannot fail short of a bug.
        onLeft: (error) => Effect.die(error),
        onRight: Effect.succeed
      })
      const target = recordPath(record.id)
      const temp = path.join(dir, `.${record.id}.${randomSuffix(6)}${tempSuffix}`)
      yield* Effect.scoped(
        Effect.gen(function*() {
          const file = yield* fs.open(temp, { flag: "wx", mode: fileMode })
          yield* file.writeAll(encoder.encode(text + "\n"))
          yield* file.sync
        })
      ).pipe(Effect.onError(() => fs.remove(temp).pipe(Effect.ignore)))
      yield* fs.rename(temp, target)
    })

  const load = Effect.gen(function*() {
    const names = yield* fs.readDirectory(dir)
    const records: Array<Task.TaskRecord> = []
    const corrupt: Array<CorruptRecord> = []
    for (const name of names.slice().sort()) {
      const file = path.join(dir, name)
      if (name.startsWith(".") && name.endsWith(tempSuffix)) {
        // A write that a crash cut short; the record it was replacing is intact.
        yield* fs.remove(file).pipe(Effect.ignore)
        continue
      }
      if (!name.endsWith(".json")) continue
      const text = yield* fs.readFileString(file).pipe(Effect.either)
      if (Either.isLeft(text)) {
        corrupt.push({ file, message: text.left.message })
        continue
      }
      const decoded = Task.decodeRecordJson(text.right)
      if (Either.isLeft(decoded)) {
        corrupt.push({ file, message: ParseResult.TreeFormatter.formatErrorSync(decoded.left) })
        continue
      }
      if (`${decoded.right.id}.json` !== name) {
        corrupt.push({ file, message: `the record is for task ${decoded.right.id}` })
        continue
      }
      records.push(decoded.right)
    }
    return { records, corrupt }
  })

  const createOutput = (file: string) =>
    fs.writeFile(file, new Uint8Array(0), { flag: "a", mode: fileMode }).pipe(
      Effect.zipRight(fs.chmod(file, fileMode))
    )

  const append = (file: string, text: string) =>
    fs.writeFile(file, encoder.encode(text), { flag: "a", mode: fileMode })

  const read = (file: string, offset: number, options: { readonly maxBytes: number; readonly final: boolean }) =>
    Effect.gen(function*() {
      const start = Math.max(0, Math.floor(offset))
      const empty: OutputChunk = { text: "", nextOffset: start }
      if (!(yield* fs.exists(file))) return empty
      return yield* Effect.scoped(
        Effect.gen(function*() {
          const handle = yield* fs.open(file, { flag: "r" })
          const size = Number((yield* handle.stat).size)
          if (start >= size) return empty
          const length = Math.min(size - start, options.maxBytes)
          yield* handle.seek(start, "start")
          const bytes = Option.getOrElse(yield* handle.readAlloc(length), () => new Uint8Array(0))
          // A writer may be mid-character at the end of a live file; a finished one is taken whole.
          const atEnd = start + bytes.length >= size
          const keep = options.final && atEnd ? bytes.length : completePrefixLength(bytes)
          return {
            text: new TextDecoder().decode(bytes.subarray(0, keep)),
            nextOffset: start + keep
          }
        })
      )
    })

  return { dir, recordPath, outputPath, ensureDir, write, load, createOutput, append, read }
}
