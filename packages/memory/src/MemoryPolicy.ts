/**
 * What the memory workers may do, as `Permissions` policies: they run with
 * no user to ask, so the host answers every `can_use_tool` itself.
 *
 * - The dream and the extraction: read-only shell (`ls`, `cat`, `grep`,
 *   `head`, `tail`, `wc`, without redirection, pipes, chaining or
 *   substitution), the read-only file tools anywhere, and Edit/Write only
 *   inside the memory folder.
 * - Session memory: Read, Edit and Write of its one `summary.md`, nothing else.
 *
 * Everything else is denied with a reason the worker's model sees: network,
 * project files, other paths, other tools.
 *
 * @since 0.0.0
 */
import { Permissions } from "@skein/session"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"

/**
 * @since 0.0.0
 */
export const readOnlyCommands: ReadonlyArray<string> = ["ls", "cat", "grep", "head", "tail", "wc"]

const networkCommands = new Set(["curl", "wget", "nc", "ncat", "ssh", "scp", "rsync", "ftp", "telnet", "http", "https"])

const writeTools = new Set(["Write", "Edit", "MultiEdit", "NotebookEdit"])
const readTools = new Set(["Read", "Glob", "Grep", "LS"])
const networkTools = new Set(["WebFetch", "WebSearch"])

/**
 * Why a shell command is not read-only, or none if it is.
 *
 * @since 0.0.0
 */
export const shellDenial = (command: string): string | undefined => {
  const words = command.trim().split(/\s+/)
  const first = Path.basename(words[0] ?? "")
  if (networkCommands.has(first) || words.some((w) => networkCommands.has(Path.basename(w)))) {
    return `no network access: ${first} is not allowed`
  }
  if (/[|;&<>`\n\r]|\$\(/.test(command)) {
    return "only single read-only commands: no redirection, pipes, chaining or substitution"
  }
  if (!readOnlyCommands.includes(first)) {
    return `only read-only commands (${readOnlyCommands.join(", ")}); ${first || "an empty command"} is not one`
  }
  return undefined
}

/**
 * Whether `file` (absolute, or relative to `cwd`) lies inside `dir`.
 *
 * @since 0.0.0
 */
export const isInside = (file: string, dir: string, cwd: string = dir): boolean => {
  const relative = Path.relative(realPath(Path.resolve(dir)), realPath(Path.resolve(cwd, file)))
  return relative !== "" && !relative.startsWith("..") && !Path.isAbsolute(relative)
}

/**
 * `path` with every symlink of its existing part resolved, so that a link
 * inside the memory folder cannot carry a write outside it. The part that does
 * not exist yet (a file about to be created) is kept as written.
 */
const realPath = (path: string, depth = 0): string => {
  const rest: Array<string> = []
  let current = path
  while (true) {
    try {
      return Path.join(Fs.realpathSync(current), ...rest.reverse())
    } catch {
      // A dangling link still decides where a write lands: follow it by hand.
      const link = danglingLink(current)
      if (link !== undefined && depth < 40) return realPath(Path.join(link, ...rest.reverse()), depth + 1)
      const parent = Path.dirname(current)
      if (parent === current) return path
      rest.push(Path.basename(current))
      current = parent
    }
  }
}

const danglingLink = (path: string): string | undefined => {
  try {
    return Fs.lstatSync(path).isSymbolicLink() ? Path.resolve(Path.dirname(path), Fs.readlinkSync(path)) : undefined
  } catch {
    return undefined
  }
}

const filePathOf = (input: { readonly [key: string]: unknown }): string | undefined => {
  const value = input["file_path"] ?? input["notebook_path"] ?? input["path"]
  return typeof value === "string" ? value : undefined
}

const commandOf = (input: { readonly [key: string]: unknown }): string => {
  const value = input["command"]
  return typeof value === "string" ? value : ""
}

/**
 * The decision for one request, given where writes may go.
 *
 * @since 0.0.0
 */
export const decide = (
  request: Pick<Permissions.PermissionRequest, "toolName" | "input">,
  options: {
    /** Writes may go to files in this folder… */
    readonly writableDir: string
    /** …or, if given, only to this one file. */
    readonly writableFile?: string | undefined
    /** Allow the read-only shell and read tools. */
    readonly read: boolean
  }
): Permissions.PermissionDecision => {
  const tool = request.toolName
  if (writeTools.has(tool)) {
    const file = filePathOf(request.input)
    if (file === undefined) return Permissions.deny(`${tool} needs a file path`)
    const allowed = options.writableFile !== undefined
      ? realPath(Path.resolve(options.writableDir, file)) === realPath(Path.resolve(options.writableFile))
      : isInside(file, options.writableDir)
    return allowed
      ? Permissions.allow()
      : Permissions.deny(
        options.writableFile !== undefined
          ? `${tool} may only change ${options.writableFile}`
          : `${tool} may only change files inside the memory folder ${options.writableDir}; ${file} is outside it`
      )
  }
  if (networkTools.has(tool)) return Permissions.deny(`no network access: ${tool} is not allowed`)
  // The CLI edits only a file it has read: the one writable file may always be read.
  if (tool === "Read" && options.writableFile !== undefined) {
    const file = filePathOf(request.input)
    if (file !== undefined && Path.resolve(options.writableDir, file) === Path.resolve(options.writableFile)) return Permissions.allow()
  }
  if (!options.read) return Permissions.deny(`${tool} is not available to this worker`)
  if (readTools.has(tool)) return Permissions.allow()
  if (tool === "Bash") {
    const denial = shellDenial(commandOf(request.input))
    return denial === undefined ? Permissions.allow() : Permissions.deny(denial)
  }
  return Permissions.deny(`${tool} is not available to this worker`)
}

/**
 * The dream's and the extraction's policy.
 *
 * @since 0.0.0
 */
export const memoryWorker = (memoryDir: string): Permissions.Permissions["Type"] =>
  Permissions.make((request) => Effect.succeed(decide(request, { writableDir: memoryDir, read: true })))

/**
 * Session memory's policy: its one file.
 *
 * @since 0.0.0
 */
export const summaryWorker = (summaryFile: string): Permissions.Permissions["Type"] =>
  Permissions.make((request) =>
    Effect.succeed(decide(request, { writableDir: Path.dirname(summaryFile), writableFile: summaryFile, read: false }))
  )
