/**
 * What each bench contender gets: the host's environment minus what would steer a CLI
 * elsewhere, and fresh folders per run, so no run sees another's config or transcripts.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

/** The host's environment without anything that would steer the CLI elsewhere. */
export const inheritedEnv = (): Record<string, string> =>
  Object.fromEntries(
    Object.entries(process.env).filter((entry): entry is [string, string] =>
      entry[1] !== undefined && !/^(ANTHROPIC_|CLAUDE|OTEL_)/.test(entry[0])
    )
  )

export interface RunDirs {
  readonly configDir: string
  readonly cwd: string
  readonly tmpDir: string
}

/** A temp root named after the bench, and a function that makes the next run's folders under it. */
export const runDirs = (bench: string) => {
  const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), `skein-bench-${bench}-`))
  let count = 0
  const fresh = (): RunDirs => {
    const base = Path.join(root, `run-${++count}`)
    const make = (name: string) => {
      const dir = Path.join(base, name)
      Fs.mkdirSync(dir, { recursive: true })
      return Fs.realpathSync(dir)
    }
    return { configDir: make("config"), cwd: make("cwd"), tmpDir: make("tmp") }
  }
  return { root, fresh }
}

/** Pids of processes whose working folder is `cwd`: what a run left behind. */
export const processesIn = (cwd: string): ReadonlyArray<number> =>
  Fs.readdirSync("/proc").flatMap((name) => {
    if (!/^\d+$/.test(name)) return []
    try {
      return Fs.readlinkSync(`/proc/${name}/cwd`) === cwd ? [Number(name)] : []
    } catch {
      return []
    }
  })
