/**
 * Running sessions against the real CLI offline: FakeModel on 127.0.0.1, a
 * private CLAUDE_CONFIG_DIR, TMPDIR and cwd per session, non-essential
 * traffic off.
 */
import { NodeContext } from "@effect/platform-node"
import { ProcessHost } from "@skein/kernel"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Layer } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Session from "../src/Session.js"

export interface LiveDirs {
  readonly root: string
  readonly configDir: string
  readonly cwd: string
  readonly tmpDir: string
}

export const dirs = Effect.acquireRelease(
  Effect.sync((): LiveDirs => {
    const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-session-"))
    const make = (name: string) => {
      const dir = Path.join(root, name)
      Fs.mkdirSync(dir)
      return dir
    }
    return { root, configDir: make("config"), cwd: make("cwd"), tmpDir: make("tmp") }
  }),
  (d) => Effect.sync(() => Fs.rmSync(d.root, { recursive: true, force: true }))
)

/** Options for a session that runs the real CLI against `model`. */
export const liveOptions = (model: FakeModel.FakeModel["Type"], d: LiveDirs, extra?: Partial<Session.SessionOptions>): Session.SessionOptions => ({
  cwd: d.cwd,
  configDir: d.configDir,
  env: {
    ...ClaudeCli.offlineEnv({ baseUrl: model.url, configDir: d.configDir, tmpDir: d.tmpDir }),
    // The parent's own CLI variables must not steer the child.
    CLAUDECODE: undefined,
    CLAUDE_CODE_ENTRYPOINT: undefined
  },
  bare: true,
  stopTimeouts: { stdinGrace: "500 millis", termGrace: "500 millis" },
  ...extra
})

export const layer = Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer)
