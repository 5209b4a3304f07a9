/**
 * Holds a TranscriptStore writer open in its own process. Arguments:
 * <config root> <cwd> <session id>. Opens the session's main chain, appends
 * one user entry, prints "open", and keeps the writer until it is killed.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Effect, Layer } from "effect"
import * as TranscriptLayout from "../../src/TranscriptLayout.js"
import * as TranscriptStore from "../../src/TranscriptStore.js"

const [root = "", cwd = "", sessionId = ""] = process.argv.slice(2)

const program = Effect.gen(function*() {
  const store = yield* TranscriptStore.TranscriptStore
  const writer = yield* store.open({ cwd, sessionId })
  yield* writer.append({
    type: "user",
    uuid: "held-1",
    parentUuid: null,
    isSidechain: false,
    sessionId,
    timestamp: new Date(0).toISOString(),
    cwd,
    message: { role: "user", content: "held by another process" }
  })
  process.stdout.write("open\n")
  return yield* Effect.never
})

const layer = TranscriptStore.layer.pipe(Layer.provide(TranscriptLayout.layer(root)), Layer.provideMerge(NodeFileSystem.layer))

Effect.runPromise(Effect.scoped(program).pipe(Effect.provide(layer))).catch((error: unknown) => {
  process.stderr.write(`${String(error)}\n`)
  process.exit(1)
})
