/**
 * Where Claude Code keeps a session's files, exactly as the CLI names them:
 *
 * ```
 * <root>/projects/<sanitized cwd>/<sessionId>.jsonl
 * <root>/projects/<sanitized cwd>/<sessionId>/subagents/agent-<agentId>.jsonl (+ .meta.json)
 * <root>/projects/<sanitized cwd>/<sessionId>/remote-agents/
 * <root>/projects/<sanitized cwd>/<sessionId>/session-memory/summary.md
 * ```
 *
 * `root` is `CLAUDE_CONFIG_DIR`, else `~/.claude`. The folder name of a cwd
 * replaces every UTF-16 code unit outside `[A-Za-z0-9]` with `-`; past 200
 * characters it keeps the first 200 and appends `-` and a base-36 hash of the
 * cwd. Checked against CLI 2.1.332 (see test/TranscriptLayout.test.ts).
 *
 * The mapping is lossy (`/a-b` and `/a/b` share a folder), so a reader that
 * cares must check the `cwd` the entries carry: `checkCwd`.
 *
 * @since 0.0.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import type { PlatformError } from "@effect/platform/Error"
import { Config, Context, Effect, Layer, Option, Stream } from "effect"
import * as Os from "node:os"
import * as Path from "node:path"

/**
 * Folder names longer than this are cut and suffixed with a hash.
 *
 * @since 0.0.0
 */
export const maxSanitizedLength = 200

/** The 32-bit string hash the CLI uses for long folder names, over UTF-16 code units. */
const stringHash = (text: string): number => {
  let hash = 0
  for (let i = 0; i < text.length; i++) {
    hash = ((hash << 5) - hash + text.charCodeAt(i)) | 0
  }
  return hash
}

/**
 * The project folder name of a working directory, as the CLI computes it.
 * Pass the physical path (symlinks resolved, see `canonicalCwd`): the CLI
 * sees its cwd through `getcwd`.
 *
 * @since 0.0.0
 */
export const sanitize = (cwd: string): string => {
  const sanitized = cwd.replace(/[^a-zA-Z0-9]/g, "-")
  if (sanitized.length <= maxSanitizedLength) return sanitized
  return `${sanitized.slice(0, maxSanitizedLength)}-${Math.abs(stringHash(cwd)).toString(36)}`
}

/**
 * The physical path of a directory (symlinks resolved), which is what the CLI
 * stores as `cwd` and names the project folder after.
 *
 * @since 0.0.0
 */
export const canonicalCwd = (cwd: string): Effect.Effect<string, never, FileSystem.FileSystem> =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => Effect.orElseSucceed(fs.realPath(Path.resolve(cwd)), () => Path.resolve(cwd)))

// ---------------------------------------------------------------------------
// Paths
// ---------------------------------------------------------------------------

/**
 * @since 0.0.0
 */
export const transcriptExtension = ".jsonl"

/**
 * `<root>/projects`.
 *
 * @since 0.0.0
 */
export const projectsDir = (root: string): string => Path.join(root, "projects")

/**
 * `<root>/projects/<sanitized cwd>`.
 *
 * @since 0.0.0
 */
export const projectDir = (root: string, cwd: string): string => Path.join(projectsDir(root), sanitize(cwd))

/**
 * The files of one subagent (sidechain) transcript.
 *
 * @since 0.0.0
 */
export interface SubagentPaths {
  readonly agentId: string
  /** `<sessionId>/subagents/agent-<agentId>.jsonl` */
  readonly transcript: string
  /** `<sessionId>/subagents/agent-<agentId>.meta.json` */
  readonly meta: string
}

/**
 * Every path of one session, given its project folder.
 *
 * @since 0.0.0
 */
export interface SessionPaths {
  readonly sessionId: string
  readonly projectDir: string
  /** `<projectDir>/<sessionId>.jsonl`, the main chain. */
  readonly transcript: string
  /** `<projectDir>/<sessionId>/`, the session's own folder. */
  readonly sessionDir: string
  readonly subagentsDir: string
  readonly remoteAgentsDir: string
  readonly sessionMemoryDir: string
  /** `<sessionId>/session-memory/summary.md` */
  readonly sessionMemorySummary: string
  readonly subagent: (agentId: string) => SubagentPaths
}

/**
 * The paths of a session inside a project folder.
 *
 * @since 0.0.0
 */
export const sessionPaths = (projectDir: string, sessionId: string): SessionPaths => {
  const sessionDir = Path.join(projectDir, sessionId)
  const subagentsDir = Path.join(sessionDir, "subagents")
  const sessionMemoryDir = Path.join(sessionDir, "session-memory")
  return {
    sessionId,
    projectDir,
    transcript: Path.join(projectDir, `${sessionId}${transcriptExtension}`),
    sessionDir,
    subagentsDir,
    remoteAgentsDir: Path.join(sessionDir, "remote-agents"),
    sessionMemoryDir,
    sessionMemorySummary: Path.join(sessionMemoryDir, "summary.md"),
    subagent: (agentId) => ({
      agentId,
      transcript: Path.join(subagentsDir, `agent-${agentId}${transcriptExtension}`),
      meta: Path.join(subagentsDir, `agent-${agentId}.meta.json`)
    })
  }
}

/**
 * The session id a main-chain transcript file name carries, if it is one
 * (`<id>.jsonl`; subagent files live one level deeper and never match here).
 *
 * @since 0.0.0
 */
export const sessionIdOfFile = (fileName: string): Option.Option<string> => {
  const base = Path.basename(fileName)
  return base.endsWith(transcriptExtension) && base.length > transcriptExtension.length
    ? Option.some(base.slice(0, -transcriptExtension.length))
    : Option.none()
}

/**
 * The agent id of a subagent transcript file name (`agent-<id>.jsonl`).
 *
 * @since 0.0.0
 */
export const agentIdOfFile = (fileName: string): Option.Option<string> => {
  const base = Path.basename(fileName)
  return base.startsWith("agent-") && base.endsWith(transcriptExtension) && !base.endsWith(".meta.json")
    ? Option.some(base.slice("agent-".length, -transcriptExtension.length))
    : Option.none()
}

// ---------------------------------------------------------------------------
// Root
// ---------------------------------------------------------------------------

/**
 * `CLAUDE_CONFIG_DIR`, else `~/.claude`.
 *
 * @since 0.0.0
 */
export const rootConfig: Config.Config<string> = Config.string("CLAUDE_CONFIG_DIR").pipe(
  Config.option,
  Config.map(Option.getOrElse(() => Path.join(Os.homedir(), ".claude")))
)

/**
 * @since 0.0.0
 */
export class TranscriptLayout extends Context.Tag("@skein/store/TranscriptLayout")<TranscriptLayout, {
  readonly root: string
  readonly projectsDir: string
  /** The project folder of a cwd (pass the physical path). */
  readonly projectDir: (cwd: string) => string
  /** The paths of a session of a cwd. */
  readonly session: (cwd: string, sessionId: string) => SessionPaths
}>() {}

/**
 * @since 0.0.0
 */
export const make = (root: string): TranscriptLayout["Type"] => {
  const resolved = Path.resolve(root)
  return TranscriptLayout.of({
    root: resolved,
    projectsDir: projectsDir(resolved),
    projectDir: (cwd) => projectDir(resolved, cwd),
    session: (cwd, sessionId) => sessionPaths(projectDir(resolved, cwd), sessionId)
  })
}

/**
 * @since 0.0.0
 */
export const layer = (root: string): Layer.Layer<TranscriptLayout> => Layer.succeed(TranscriptLayout, make(root))

/**
 * The root from `CLAUDE_CONFIG_DIR`, else `~/.claude`.
 *
 * @since 0.0.0
 */
export const layerConfig: Layer.Layer<TranscriptLayout, never> = Layer.effect(
  TranscriptLayout,
  Effect.map(Effect.orDie(rootConfig), make)
)

// ---------------------------------------------------------------------------
// The cwd check
// ---------------------------------------------------------------------------

/**
 * What the entries of a transcript say about its working directory.
 * - `Match`: the first entry carrying a `cwd` names the expected one.
 * - `Mismatch`: it names another directory that sanitizes to the same folder.
 * - `Unknown`: no entry carries a `cwd` (e.g. metadata only).
 *
 * @since 0.0.0
 */
export type CwdCheck =
  | { readonly _tag: "Match"; readonly cwd: string }
  | { readonly _tag: "Mismatch"; readonly expected: string; readonly found: string }
  | { readonly _tag: "Unknown" }

/** The `cwd` of one JSONL line, without parsing lines that cannot carry one. */
export const cwdOfLine = (line: string): Option.Option<string> => {
  if (!line.includes("\"cwd\"")) return Option.none()
  try {
    const json: unknown = JSON.parse(line)
    if (typeof json === "object" && json !== null && "cwd" in json && typeof json.cwd === "string") {
      return Option.some(json.cwd)
    }
  } catch {
    // A torn or malformed line says nothing about the cwd.
  }
  return Option.none()
}

/**
 * The `cwd` recorded by the first entry that has one, reading the file from
 * the start only as far as needed.
 *
 * @since 0.0.0
 */
export const recordedCwd = (file: string): Effect.Effect<Option.Option<string>, PlatformError, FileSystem.FileSystem> =>
  Effect.flatMap(FileSystem.FileSystem, (fs) =>
    fs.stream(file).pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.filterMap(cwdOfLine),
      Stream.runHead
    ))

/**
 * Checks that a transcript belongs to `cwd`, since two directories can share
 * a project folder.
 *
 * @since 0.0.0
 */
export const checkCwd = (
  file: string,
  cwd: string
): Effect.Effect<CwdCheck, PlatformError, FileSystem.FileSystem> =>
  Effect.map(recordedCwd(file), Option.match({
    onNone: (): CwdCheck => ({ _tag: "Unknown" }),
    onSome: (found): CwdCheck =>
      Path.resolve(found) === Path.resolve(cwd)
        ? { _tag: "Match", cwd: found }
        : { _tag: "Mismatch", expected: cwd, found }
  }))
