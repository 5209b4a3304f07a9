/**
 * Where the Claude Code CLI lives: the installed `@anthropic-ai/claude-code`
 * package first (its native binary), then `claude` on PATH.
 */
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
import { CliNotFound } from "../SessionError.js"

const isExecutable = (file: string): boolean => {
  try {
    Fs.accessSync(file, Fs.constants.X_OK)
    return Fs.statSync(file).isFile()
  } catch {
    return false
  }
}

const fromPackage = (): string | undefined => {
  try {
    const manifest = createRequire(import.meta.url).resolve("@anthropic-ai/claude-code/package.json")
    const dir = Path.dirname(manifest)
    return [Path.join(dir, "bin", "claude.exe"), Path.join(dir, "bin", "claude"), Path.join(dir, "cli.js")]
      .find(isExecutable)
  } catch {
    return undefined
  }
}

/** The path found first; the search is synchronous fs work, so it runs once, not at every session start. */
let found: string | undefined

export const resolve: Effect.Effect<string, CliNotFound> = Effect.suspend(() => {
  if (found !== undefined) return Effect.succeed(found)
  const dirs = (process.env.PATH ?? "").split(Path.delimiter).filter((d) => d.length > 0)
  found = fromPackage() ?? dirs.map((d) => Path.join(d, "claude")).find(isExecutable)
  if (found !== undefined) return Effect.succeed(found)
  return Effect.fail(new CliNotFound({ searched: ["@anthropic-ai/claude-code", ...dirs.map((d) => Path.join(d, "claude"))] }))
})
