/**
 * What the memory jobs' end-to-end tests share: the real CLI's options
 * against FakeModel, offline, and the stores its workers record through.
 */
import { NodeContext } from "@effect/platform-node"
import type { Session } from "@skein/session"
import { SessionIndex, TranscriptLayout, TranscriptStore } from "@skein/store"
import { ClaudeCli, type FakeModel } from "@skein/testkit"
import { Layer } from "effect"

/** The CLI against `model`, in `d`'s private folders. Not --bare by default: the bare tool set has no Write. */
export const launchOf = (model: FakeModel.FakeModel["Type"], d: ClaudeCli.OfflineDirs, bare = false): Session.SessionOptions => ({
  cwd: d.cwd,
  configDir: d.configDir,
  env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: d.configDir, tmpDir: d.tmpDir }),
  bare,
  stopTimeouts: { stdinGrace: "500 millis", termGrace: "500 millis" }
})

/** TranscriptStore and SessionIndex over `d`'s config root, built in the test's scope. */
export const stores = (d: ClaudeCli.OfflineDirs) =>
  Layer.build(
    Layer.mergeAll(TranscriptStore.layer, SessionIndex.layer).pipe(
      Layer.provide(TranscriptLayout.layer(d.configDir)),
      Layer.provide(NodeContext.layer)
    )
  )
