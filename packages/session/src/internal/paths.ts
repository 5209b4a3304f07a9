/**
 * Where the CLI keeps a session's transcript, and whether `--resume` can find one.
 */
import { TranscriptLayout } from "@skein/store"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

/** The CLI's config root for a session's options and environment. */
export const configRoot = (options: {
  readonly configDir?: string | undefined
  readonly env?: Readonly<Record<string, string | undefined>> | undefined
  readonly envMode?: "merge" | "replace" | undefined
}): string =>
  options.configDir ?? options.env?.CLAUDE_CONFIG_DIR ??
    (options.envMode === "replace" ? undefined : process.env.CLAUDE_CONFIG_DIR) ??
    Path.join(Os.homedir(), ".claude")

const exists = (path: string): Promise<boolean> => Fs.promises.access(path).then(() => true, () => false)

/**
 * Whether `--resume <resume>` can find its transcript: a path, or an id the
 * CLI looks up in every project folder of the root (it resumes across cwds).
 * Asynchronous: a root with many projects must not hold the event loop.
 */
export const resumable = (root: string, resume: string): Effect.Effect<boolean> =>
  Effect.promise(async () => {
    if (resume.endsWith(TranscriptLayout.transcriptExtension)) return exists(resume)
    const projects = TranscriptLayout.projectsDir(root)
    const dirs = await Fs.promises.readdir(projects).catch((): ReadonlyArray<string> => [])
    const found = await Promise.all(dirs.map((dir) => exists(Path.join(projects, dir, `${resume}${TranscriptLayout.transcriptExtension}`))))
    return found.includes(true)
  })

/** The transcript path the CLI uses for a session under a config root. */
export const transcriptPath = (configDir: string, cwd: string, sessionId: string): string =>
  TranscriptLayout.sessionPaths(TranscriptLayout.projectDir(configDir, cwd), sessionId).transcript
