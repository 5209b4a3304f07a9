/**
 * The files that make up one CLI session under a config root, as paths
 * relative to it: the main chain `projects/<project>/<uuid>.jsonl` and
 * everything under `projects/<project>/<uuid>/` (subagent sidechains and
 * their `.meta.json`, `session-memory/summary.md`, remote agents).
 * JSONL files only grow, so they are mirrored by appended byte ranges;
 * every other file is rewritten whole by the CLI and mirrored whole.
 */
import * as Effect from "effect/Effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"

export type Kind = "append" | "whole"

export interface SessionFile {
  /** Relative to the config root, with `/` separators. */
  readonly path: string
  readonly kind: Kind
}

export const kindOf = (path: string): Kind => path.endsWith(".jsonl") ? "append" : "whole"

const exists = (path: string) => Fs.stat(path).then(() => true, () => false)

/** Files under `dir`, recursively, relative to `root`. */
const walk = async (root: string, dir: string): Promise<Array<string>> => {
  const entries = await Fs.readdir(dir, { withFileTypes: true }).catch(() => [])
  const nested = await Promise.all(entries.map((entry) => {
    const full = Path.join(dir, entry.name)
    if (entry.isDirectory()) return walk(root, full)
    return Promise.resolve(entry.isFile() ? [Path.relative(root, full)] : [])
  }))
  return nested.flat()
}

/** The session's files, found by scanning `projects/*` for `<uuid>.jsonl`; empty when the CLI has written nothing yet. */
export const list = (configDir: string, cliSessionId: string): Effect.Effect<ReadonlyArray<SessionFile>, Error> =>
  Effect.tryPromise({
    try: async () => {
      const projects = Path.join(configDir, "projects")
      const names = await Fs.readdir(projects).catch(() => [])
      const found: Array<string> = []
      for (const project of names) {
        const main = Path.join(projects, project, `${cliSessionId}.jsonl`)
        const folder = Path.join(projects, project, cliSessionId)
        if (await exists(main)) found.push(Path.relative(configDir, main))
        found.push(...await walk(configDir, folder))
      }
      return found.sort().map((path) => ({ path: path.split(Path.sep).join("/"), kind: kindOf(path) }))
    },
    catch: (cause) => cause instanceof Error ? cause : new Error(String(cause))
  })

/** Bytes `[from, to)` of a file. */
export const readRange = (file: string, from: number, to: number): Effect.Effect<Buffer, Error> =>
  Effect.tryPromise({
    try: async () => {
      const handle = await Fs.open(file, "r")
      try {
        const buffer = Buffer.alloc(to - from)
        let done = 0
        while (done < buffer.length) {
          const { bytesRead } = await handle.read(buffer, done, buffer.length - done, from + done)
          if (bytesRead === 0) break
          done += bytesRead
        }
        return buffer.subarray(0, done)
      } finally {
        await handle.close()
      }
    },
    catch: (cause) => cause instanceof Error ? cause : new Error(String(cause))
  })

/** The file's size, or undefined when it is missing. */
export const size = (file: string): Effect.Effect<number | undefined> =>
  Effect.promise(() => Fs.stat(file).then((s) => s.size, () => undefined))

/** The file's mtime in epoch milliseconds, or 0 when it is missing. */
export const mtime = (file: string): Effect.Effect<number> =>
  Effect.promise(() => Fs.stat(file).then((s) => s.mtimeMs, () => 0))

/**
 * Splits new bytes into the rows to store: each complete line with its
 * offset, and the rest (a line still being written, or torn) as it is.
 */
export const splitLines = (bytes: Buffer, offset: number): ReadonlyArray<{ readonly offset: number; readonly data: Buffer }> => {
  const rows: Array<{ offset: number; data: Buffer }> = []
  let start = 0
  while (start < bytes.length) {
    const newline = bytes.indexOf(10, start)
    const end = newline === -1 ? bytes.length : newline + 1
    rows.push({ offset: offset + start, data: bytes.subarray(start, end) })
    start = end
  }
  return rows
}
