/**
 * Running sessions against the real CLI offline: FakeModel on 127.0.0.1, a
 * private CLAUDE_CONFIG_DIR, TMPDIR and cwd per session, non-essential
 * traffic off.
 */
import { NodeContext } from "@effect/platform-node"
import { ProcessHost } from "@skein/kernel"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Layer } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Session from "../src/Session.js"

export type LiveDirs = ClaudeCli.OfflineDirs

export const dirs = ClaudeCli.offlineDirs("skein-session-")

/** Options for a session that runs the real CLI against `model`. */
export const liveOptions = (model: FakeModel.FakeModel["Type"], d: LiveDirs, extra?: Partial<Session.SessionOptions>): Session.SessionOptions => ({
  cwd: d.cwd,
  configDir: d.configDir,
  env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: d.configDir, tmpDir: d.tmpDir }),
  bare: true,
  stopTimeouts: { stdinGrace: "500 millis", termGrace: "500 millis" },
  ...extra
})

export const layer = Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer)

/** The main-chain transcripts under `configDir` (not the 2.0 line's own `agent-*` sidechains). */
export const transcripts = (configDir: string): ReadonlyArray<string> => {
  const projects = Path.join(configDir, "projects")
  if (!Fs.existsSync(projects)) return []
  return Fs.readdirSync(projects, { recursive: true }).map(String)
    .filter((file) => file.endsWith(".jsonl") && !Path.basename(file).startsWith("agent-"))
    .map((file) => Path.join(projects, file))
}

/** The text of each user prompt a transcript holds, in order. */
export const userPrompts = (file: string): ReadonlyArray<string> =>
  Fs.readFileSync(file, "utf8").split("\n").filter((line) => line.length > 0).flatMap((line) => {
    const entry: unknown = JSON.parse(line)
    if (typeof entry !== "object" || entry === null || !("type" in entry) || entry.type !== "user") return []
    const message = "message" in entry ? entry.message : undefined
    const content = typeof message === "object" && message !== null && "content" in message ? message.content : undefined
    return typeof content === "string" ? [content] : []
  })

/** Whether a process of that pid exists. */
export const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}
