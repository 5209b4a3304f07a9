/**
 * Issue 25, "Failures reported as success": a turn whose result is an error,
 * or whose only answer is the CLI's synthetic error message, carries
 * `TurnFailed {reason, text}` with the CLI's own words, never "success".
 * Over a real capture of CLI 2.1.332 without a login, and over the real CLI.
 */
import { describe, expect, it } from "@effect/vitest"
import { CliMessage as Messages } from "@skein/protocol"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Chunk, Effect, Exit, Option, Stream } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Turns from "../src/internal/turns.js"
import * as Session from "../src/Session.js"
import { TurnFailed } from "../src/SessionError.js"
import * as Turn from "../src/Turn.js"
import * as Live from "./live.js"

const capture = (file: string): ReadonlyArray<Turn.SessionEvent> =>
  Fs.readFileSync(file, "utf8").split("\n").filter((l) => l.trim().length > 0).map((line, i) => Messages.decodeLine(line, i + 1))

const notLoggedIn = capture(Path.join(import.meta.dirname, "fixtures", "not-logged-in.ndjson"))
const answered = capture(Path.join(import.meta.dirname, "..", "..", "protocol", "test", "fixtures", "text-thinking.ndjson"))

/** One host turn fed `events`; its summary and the model text `Turn.texts` finds in it. */
const oneTurn = (events: ReadonlyArray<Turn.SessionEvent>) =>
  Effect.gen(function*() {
    const turns = yield* Turns.make({
      tracker: {},
      writeUser: () => Effect.void,
      cost: () => 0,
      ended: () => Option.none(),
    })
    const turn = yield* turns.send("say hi")
    yield* turns.onEvents(events)
    const summary = yield* turn.result
    const texts = Chunk.toReadonlyArray(yield* Stream.runCollect(Turn.texts(turn.events)))
    return { summary, texts }
  })

describe("TurnFailed", () => {
  it.scoped("a turn without a login fails with TurnFailed carrying the CLI's words, not success", () =>
    Effect.gen(function*() {
      const { summary, texts } = yield* oneTurn(notLoggedIn)
      expect(summary.isError).toBe(true)
      expect(summary.text).toBeUndefined()
      expect(summary.failure).toEqual(new TurnFailed({ reason: "authentication_failed", text: "Not logged in · Please run /login" }))
      expect(summary.failure?.message).toBe("Not logged in · Please run /login")
      // The synthetic message is not model text.
      expect(texts).toEqual([])
      const exit = yield* Effect.exit(Turn.succeeded(summary))
      expect(exit).toEqual(Exit.fail(summary.failure))
    }))

  it.scoped("a turn the model answered has no failure, and its text is the model's", () =>
    Effect.gen(function*() {
      const { summary, texts } = yield* oneTurn(answered)
      expect(summary.isError).toBe(false)
      expect(summary.failure).toBeUndefined()
      expect(texts.length).toBeGreaterThan(0)
      expect(summary.text).toBe(texts.join("\n"))
      expect(yield* Turn.succeeded(summary)).toBe(summary)
    }))

  it.scoped("an error result's subtype and errors are the failure's reason and text", () =>
    Effect.gen(function*() {
      const results = answered.flatMap((e) => e._tag === "Message" && e.message.type === "result" ? [e.message] : [])
      const last = results[0]!
      const maxTurns: Messages.ResultError = { ...last, subtype: "error_max_turns", is_error: true, errors: ["Reached maximum number of turns (1)"] }
      const summary = Turn.summarize([maxTurns], { costBefore: 0, interrupted: false })
      expect(summary.failure).toEqual(new TurnFailed({ reason: "error_max_turns", text: "Reached maximum number of turns (1)" }))
    }))

  it.scopedLive("the real CLI without a login: the turn's failure is TurnFailed {authentication_failed, Not logged in}", () =>
    Effect.gen(function*() {
      // FakeModel stands where the API would be; with no key the CLI never calls it.
      const model = yield* FakeModel.make({ replies: [FakeModel.text("never sent")] })
      const d = yield* Live.dirs
      const options = Live.liveOptions(model, d)
      const session = yield* Session.start({
        ...options,
        env: { ...ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: d.configDir, tmpDir: d.tmpDir }), ANTHROPIC_API_KEY: undefined }
      })
      const summary = yield* Effect.flatMap(session.send("say hi"), (t) => t.result)
      expect(summary.failure?._tag).toBe("TurnFailed")
      expect(summary.failure?.reason).toBe("authentication_failed")
      expect(summary.failure?.text).toMatch(/Not logged in/)
      expect(summary.text).toBeUndefined()
      expect((yield* model.requests).filter(FakeModel.isConversation)).toEqual([])
    }).pipe(Effect.provide(Live.layer)), 120_000)
})
