/**
 * The CLI's own `/compact` through `Compaction.viaCli`: one turn of the live
 * session, with the pass announced and recorded in the session's state.
 */
import { describe, expect, it } from "@effect/vitest"
import { ResumeLoader } from "@skein/store"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Chunk, Effect, Queue } from "effect"
import * as CompactableSession from "../src/CompactableSession.js"
import * as Compaction from "../src/Compaction.js"
import * as Live from "./live.js"

describe("Compaction.viaCli with the real CLI", () => {
  it.scopedLive("runs the CLI's /compact as a turn: the CLI writes its boundary, the session keeps its process and id", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.text("The first river is the Nile."),
          FakeModel.matching(FakeModel.text("<summary>One river so far: the Nile.</summary>"), FakeModel.isCompaction),
          FakeModel.text("The second is the Amazon.")
        ]
      })
      const d = yield* ClaudeCli.offlineDirs("skein-compact-cli-")
      const session = yield* CompactableSession.start(Live.sessionOptions(model, d))
      const compactions = yield* session.compactions
      yield* Effect.flatMap(session.send("first river?"), (t) => t.result)
      const before = yield* session.current
      const id = yield* before.sessionId

      const turn = yield* Compaction.viaCli(session)
      expect(turn.isError).toBe(false)
      const events = Chunk.toReadonlyArray(yield* Queue.takeAll(compactions))
      expect(events.map((e) => e._tag)).toEqual(["Started", "CliFinished"])
      expect(events[0]?._tag === "Started" && events[0].pass).toBe("cli")
      expect((yield* session.state.get).compaction).toMatchObject({ compacting: false, lastOutcome: "compacted" })
      expect((yield* model.requests).some(FakeModel.isCompaction)).toBe(true)

      // No restart: the same process answers the next turn, from the CLI's own summary.
      expect(yield* session.current).toBe(before)
      const second = yield* Effect.flatMap(session.send("second river?"), (t) => t.result)
      expect(second.text).toBe("The second is the Amazon.")
      expect(yield* before.sessionId).toBe(id)
      const request = yield* model.awaitRequest(0, Live.withPrompt("second river?"))
      expect(FakeModel.messagesText(request)).toContain("One river so far: the Nile.")
      expect(FakeModel.messagesText(request)).not.toContain("The first river is the Nile.")

      const transcript = (yield* before.state.get).transcriptPath!
      const view = yield* ResumeLoader.load(transcript)
      expect(view.messages.some((m) => Live.textOf(m).includes("One river so far"))).toBe(true)
    }).pipe(Effect.provide(Live.sessionLayer)), { timeout: 120_000 })
})
