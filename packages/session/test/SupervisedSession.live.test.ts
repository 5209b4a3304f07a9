import { describe, expect, it } from "@effect/vitest"
import { FakeModel } from "@skein/testkit"
import { Effect } from "effect"
import { ProcessHost } from "@skein/kernel"
import * as SupervisedSession from "../src/SupervisedSession.js"
import * as Live from "./live.js"

/** Gone: no such process, or a zombie. */
const isGone = (pid: number): boolean => !ProcessHost.isAlive(pid)

describe("SupervisedSession with the real CLI", () => {
  it.scopedLive("a CLI SIGKILLed mid-turn fails that turn, then comes back with --resume and the history", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.text("Noted: the word is pelican."),
          // Slow enough that the CLI is killed while it streams.
          FakeModel.withDelay(FakeModel.text("Once upon a time, a very long story began"), "2 seconds"),
          FakeModel.text("The word was pelican.")
        ]
      })
      const d = yield* Live.dirs
      const supervised = yield* SupervisedSession.start({ ...Live.liveOptions(model, d), restart: { base: "50 millis" } })
      const first = yield* Effect.flatMap(supervised.send("Remember the word pelican"), (t) => t.result)
      expect(first.text).toBe("Noted: the word is pelican.")
      const before = yield* supervised.current
      const id = yield* supervised.sessionId

      const doomed = yield* supervised.send("Tell me a long story")
      yield* model.awaitRequest(1, FakeModel.isConversation)
      process.kill(before.pid, "SIGKILL")
      const failure = yield* Effect.flip(doomed.result)
      expect(failure._tag).toBe("CliExited")
      expect(failure._tag === "CliExited" ? failure.signal : undefined).toBe("SIGKILL")

      const after = yield* Effect.flatMap(supervised.send("What was the word?"), (t) => t.result)
      expect(after.text).toBe("The word was pelican.")
      const now = yield* supervised.current
      expect(now.pid).not.toBe(before.pid)
      expect(isGone(before.pid)).toBe(true)
      expect(yield* supervised.restarts.get).toBe(1)
      // The resumed CLI sent the earlier history with the new message.
      const request = yield* model.awaitRequest(2, FakeModel.isConversation)
      const text = FakeModel.messagesText(request)
      expect(text).toContain("Remember the word pelican")
      expect(text).toContain("Noted: the word is pelican.")
      expect(text.indexOf("Remember the word pelican")).toBeLessThan(text.indexOf("What was the word?"))
      expect(yield* now.sessionId).toBe(id)
    }).pipe(Effect.provide(Live.layer)), 120_000)
})
