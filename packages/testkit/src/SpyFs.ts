/**
 * A FileSystem that records the operations whose order makes a write
 * durable (fsyncs, renames, links, folder creation), as lines such as
 * `sync /a/b`, `rename /a/t -> /a/b`. Everything else passes through. Tests
 * assert with it that a write is durable: the file synced before its rename,
 * the folder after.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect } from "effect"

const spyFile = (file: FileSystem.File, path: string, events: Array<string>): FileSystem.File => ({
  [FileSystem.FileTypeId]: FileSystem.FileTypeId,
  fd: file.fd,
  get stat() {
    return file.stat
  },
  seek: (offset, from) => file.seek(offset, from),
  sync: Effect.suspend(() => file.sync).pipe(Effect.tap(() => Effect.sync(() => events.push(`sync ${path}`)))),
  read: (buffer) => file.read(buffer),
  readAlloc: (size) => file.readAlloc(size),
  truncate: (length) => file.truncate(length),
  write: (buffer) => file.write(buffer),
  writeAll: (buffer) => file.writeAll(buffer)
})

/** The platform's FileSystem from context, recording into `events`. */
export const make = (events: Array<string>): Effect.Effect<FileSystem.FileSystem, never, FileSystem.FileSystem> =>
  Effect.map(FileSystem.FileSystem, (fs) => {
    const note = (line: string) => Effect.sync(() => events.push(line))
    return FileSystem.FileSystem.of({
      ...fs,
      open: (path, options) => Effect.map(fs.open(path, options), (file) => spyFile(file, path, events)),
      rename: (from, to) => Effect.tap(fs.rename(from, to), () => note(`rename ${from} -> ${to}`)),
      link: (from, to) => Effect.tap(fs.link(from, to), () => note(`link ${from} -> ${to}`)),
      makeDirectory: (path, options) => Effect.tap(fs.makeDirectory(path, options), () => note(`mkdir ${path}`))
    })
  })
