import { describe, expect, it } from "@effect/vitest"
import { FakeModel } from "@skein/testkit"
import { CliMessage, Json } from "@skein/protocol"
import { EventLog } from "@skein/store"
import { Chunk, Effect, Queue, Stream } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Permissions from "../src/Permissions.js"
import * as Session from "../src/Session.js"
import * as Live from "./live.js"

describe("Session with the real CLI", () => {
  it.scopedLive("runs a turn to idle and sums its usage", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.text("Hello from FakeModel.")] })
      const d = yield* Live.dirs
      const session = yield* Session.start(Live.liveOptions(model, d, { includePartialMessages: true }))
      expect(yield* session.initialize).toBeDefined()
      const turn = yield* session.send("Say hello")
      const events = yield* turn.events.pipe(Stream.runCollect, Effect.map(Chunk.toReadonlyArray))
      const summary = yield* turn.result
      expect(summary.text).toBe("Hello from FakeModel.")
      expect(summary.interrupted).toBe(false)
      expect(summary.usage.outputTokens).toBeGreaterThan(0)
      expect(events.some((e) => e._tag === "Message" && e.message.type === "stream_event")).toBe(true)
      const id = yield* session.sessionId
      const state = yield* session.state.get
      expect(state.sessionId).toBe(id)
      expect(state.status).toBe("idle")
      expect(state.counters.results).toBe(1)
      expect(state.transcriptPath).toBeDefined()
      expect(Fs.existsSync(state.transcriptPath!)).toBe(true)
      const request = yield* model.awaitRequest(0, FakeModel.isConversation)
      expect(FakeModel.messagesText(request)).toContain("Say hello")

      // A second turn runs after the first, in order.
      const second = yield* session.send("Again")
      const again = yield* second.result
      expect(again.text).toBe("Hello! I'm skein's fake model. Everything is working, and I'm happy to help with whatever you need.")
      expect(second.index).toBe(2)
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("allows a tool through the Permissions service, and the result reaches the model", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.toolUse("Bash", { command: "touch made-by-skein.txt" }), FakeModel.text("Done.")]
      })
      const d = yield* Live.dirs
      const asked: Array<string> = []
      const session = yield* Session.start(Live.liveOptions(model, d)).pipe(
        Effect.provide(Permissions.layer((request) => {
          asked.push(request.toolName)
          return Effect.succeed(Permissions.allow())
        }))
      )
      const summary = yield* Effect.flatMap(session.send("Make the file"), (t) => t.result)
      expect(summary.text).toBe("Done.")
      expect(asked).toEqual(["Bash"])
      expect(Fs.existsSync(Path.join(d.cwd, "made-by-skein.txt"))).toBe(true)
      const followUp = yield* model.awaitRequest(1, FakeModel.isConversation)
      expect(JSON.stringify(followUp.body)).toContain("tool_result")
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("denies with no handler, and the model sees the denial", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.toolUse("Bash", { command: "touch nope.txt" }), FakeModel.text("Understood.")]
      })
      const d = yield* Live.dirs
      const session = yield* Session.start(Live.liveOptions(model, d, { permissionPromptTool: true }))
      const summary = yield* Effect.flatMap(session.send("Make the file"), (t) => t.result)
      expect(summary.text).toBe("Understood.")
      expect(Fs.existsSync(Path.join(d.cwd, "nope.txt"))).toBe(false)
      const followUp = yield* model.awaitRequest(1, FakeModel.isConversation)
      expect(JSON.stringify(followUp.body)).toContain("no permission handler")
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("appends every event to the event log before publishing it, replayable in order", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.text("Logged.")] })
      const d = yield* Live.dirs
      const log = yield* EventLog.open({ dir: Path.join(d.root, "events"), schema: Json.JsonObject })
      const session = yield* Session.start(Live.liveOptions(model, d, { eventLog: log }))
      const seen = yield* session.subscribe
      const turn = yield* session.send("Log this")
      yield* turn.result
      const published = yield* Queue.takeAll(seen).pipe(Effect.map(Chunk.toReadonlyArray))
      const records = yield* log.read(1).pipe(Stream.runCollect, Effect.map(Chunk.toReadonlyArray))
      expect(records.map((r) => r.seq)).toEqual(records.map((_, i) => i + 1))
      // The log holds at least what subscribers saw, in the same order.
      const tail = records.slice(records.length - published.length).map((r) => r.message)
      expect(tail).toEqual(published.map(Session.eventRecord))
      const replayed = records.map((r) => CliMessage.decoder.decodeJson(r.message, r.seq))
      expect(replayed.every((d) => d._tag === "Message")).toBe(true)
      expect(replayed.some((d) => d._tag === "Message" && d.message.type === "result")).toBe(true)
    }).pipe(Effect.provide(Live.layer)))
})
