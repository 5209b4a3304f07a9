/**
 * A CLI resumed by id has no turn yet, so it has printed neither `init` nor
 * an idle: it is quiet all the same, and its id is the one it was resumed
 * with. A pass must not wait for a turn that never comes.
 */
import { describe, expect, it } from "@effect/vitest"
import { TaskManager } from "@skein/kernel"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CompactableSession from "../src/CompactableSession.js"
import * as Compaction from "../src/Compaction.js"
import * as SessionMemoryCompaction from "../src/SessionMemoryCompaction.js"
import * as Live from "./live.js"

describe("CompactableSession over a CLI resumed by id", () => {
  it.scopedLive("a pass right after another (the CLI resumed, no turn since) runs at once and keeps the id", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.text("The first moon is Io."), FakeModel.text("The second is Europa."), FakeModel.text("Third: Ganymede.")]
      })
      const d = yield* ClaudeCli.offlineDirs("skein-compact-resumed-")
      const session = yield* CompactableSession.start(Live.sessionOptions(model, d))
      yield* Effect.flatMap(session.send(`first moon? ${"Background detail. ".repeat(300)}`), (t) => t.result)
      yield* Effect.flatMap(session.send("second moon?"), (t) => t.result)
      const first = yield* session.current
      const id = yield* first.sessionId
      const summaryFile = SessionMemoryCompaction.summaryPath((yield* first.state.get).transcriptPath!)
      Fs.mkdirSync(Path.dirname(summaryFile), { recursive: true })
      Fs.writeFileSync(summaryFile, "Moons so far: Io, then Europa.")

      const tasks = yield* TaskManager.make({ root: Path.join(d.root, "tasks") })
      const pass = (window: SessionMemoryCompaction.WindowOptions) =>
        Compaction.run(session, { pass: "memory", window }).pipe(
          Effect.provide(Live.storeLayer(d.configDir)),
          Effect.provideService(TaskManager.TaskManager, tasks)
        )
      expect((yield* pass({ minTokens: 0, minTextMessages: 2 }))._tag).toBe("Compacted")
      // The CLI now runs resumed, with no turn: the second pass must not wait for one.
      const second = yield* pass({ minTokens: 1, minTextMessages: 1 }).pipe(Effect.timeout("60 seconds"))
      expect(["Compacted", "Declined"]).toContain(second._tag)
      const third = yield* Effect.flatMap(session.send("third moon?"), (t) => t.result)
      expect(third.text).toBe("Third: Ganymede.")
      expect(yield* Effect.flatMap(session.current, (s) => s.sessionId)).toBe(id)
    }).pipe(Effect.provide(Live.sessionLayer)), { timeout: 180_000 })
})
