/**
 * Running sessions against the real CLI offline: FakeModel on 127.0.0.1, a
 * private CLAUDE_CONFIG_DIR, TMPDIR and cwd per session, non-essential
 * traffic off.
 */
import { NodeContext } from "@effect/platform-node"
import { ProcessHost } from "@skein/kernel"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Layer } from "effect"
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
