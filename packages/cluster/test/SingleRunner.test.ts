/**
 * Sessions as cluster entities on one machine (the `Single` runner over
 * sqlite), with the real CLI and FakeModel: a prompt through the cluster
 * registry and the HTTP routes, a retried prompt (the same message id) run
 * once, and a turn cut by the process's end not run again when the next
 * process takes its message over: it ends with `RunnerLost`, and the next
 * prompt carries the history.
 */
import { describe, expect, it } from "@effect/vitest"
import { createOpencodeClient } from "@opencode-ai/sdk/v2"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Exit, Scope } from "effect"
import * as Harness from "./harness.js"

const conversations = (model: FakeModel.FakeModel["Type"]) =>
  Effect.map(model.requests, (all) => all.filter(FakeModel.isConversation))

describe("the cluster registry on a single runner (sqlite)", () => {
  it.scopedLive("a prompt through the HTTP routes reaches the session's entity and answers; a retried message id runs once", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.text("First answer."), FakeModel.text("Second answer.")] })
      const server = yield* Harness.start(model)
      const client = createOpencodeClient({ baseUrl: server.url, headers: server.headers, directory: server.dirs.cwd })
      const session = yield* Effect.promise(async () => (await client.session.create({})).data!)
      const reply = yield* Effect.promise(async () =>
        (await client.session.prompt({ sessionID: session.id, messageID: "msg_retried", parts: [{ type: "text", text: "one" }] })).data!
      )
      expect(reply.parts.flatMap((p) => (p.type === "text" ? [p.text] : []))).toContain("First answer.")
      // The same message id again, as a client retrying a prompt whose answer it lost: the stored reply, no second turn.
      const again = yield* server.registry.prompt(session.id, "one", { messageID: "msg_retried" })
      expect(again.info.id).toBe(reply.info.id)
      expect((yield* conversations(model)).length).toBe(1)
      const second = yield* server.registry.prompt(session.id, "two")
      expect(second.parts.flatMap((p) => (p.type === "text" ? [p.text] : []))).toContain("Second answer.")
      const messages = yield* Effect.promise(async () => (await client.session.messages({ sessionID: session.id })).data!)
      expect(messages.map((m) => m.info.role)).toEqual(["user", "assistant", "user", "assistant"])
      const listed = yield* Effect.promise(async () => (await client.session.list()).data!)
      expect(listed.map((s) => s.id)).toContain(session.id)
      // The first prompt named the session, and the catalog other runners list from knows it.
      expect((yield* server.registry.get(session.id)).title).toBe("one")
    }))

  it.scopedLive("a prompt not waited for runs once when sent twice with its id; a client retrying it and waiting gets that turn's reply", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.text("Only answer."), FakeModel.text("Never asked for.")] })
      const server = yield* Harness.start(model)
      const session = yield* server.registry.create({ directory: server.dirs.cwd })
      const from = yield* server.events.nextSeq
      yield* Effect.all([
        server.registry.promptAsync(session.id, "one", { messageID: "msg_twice" }),
        server.registry.promptAsync(session.id, "one", { messageID: "msg_twice" })
      ], { concurrency: 2 })
      const seen = yield* Harness.eventsOf(server, session.id, from, (all) => all.some((p) => p.type === "session.idle")).pipe(
        Effect.timeout("60 seconds")
      )
      expect(seen.map(Harness.errorName).filter((n) => n !== undefined)).toEqual([])
      // A client retrying it and waiting this time: the turn's reply, no second turn.
      const again = yield* server.registry.prompt(session.id, "one", { messageID: "msg_twice" })
      expect(again.parts.flatMap((p) => (p.type === "text" ? [p.text] : []))).toContain("Only answer.")
      expect((yield* conversations(model)).length).toBe(1)
      const messages = yield* server.registry.messages(session.id)
      expect(messages.map((m) => m.info.role)).toEqual(["user", "assistant"])
    }))

  it.scopedLive("an unknown session id is refused before any entity starts", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({})
      const server = yield* Harness.start(model)
      const exit = yield* Effect.exit(server.registry.prompt("ses_doesnotexist", "hello"))
      expect(Exit.isFailure(exit) && JSON.stringify(exit.cause)).toContain("SessionNotFound")
      expect(yield* server.registry.running).toEqual([])
    }))

  it.scopedLive("a turn cut by the process's end is not run again by the next process: RunnerLost, then the next prompt has the history", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.text("First answer."),
          // Never finishes before the process ends.
          FakeModel.withDelay(FakeModel.text("Cut short."), "60 seconds"),
          FakeModel.text("Third answer.")
        ]
      })
      const dirs = yield* ClaudeCli.offlineDirs("skein-cluster-")
      const first = yield* Scope.make()
      const one = yield* Scope.extend(Harness.start(model, { dirs }), first)
      const session = yield* one.registry.create({ directory: dirs.cwd })
      yield* one.registry.prompt(session.id, "one")
      const cut = yield* one.registry.promptAsync(session.id, "two")
      yield* model.awaitRequest(1, FakeModel.isConversation)
      const from = yield* one.events.nextSeq
      yield* Scope.close(first, Exit.void)

      const two = yield* Harness.start(model, { dirs })
      // The persisted prompt is delivered again; its turn had started, so it ends as lost.
      const seen = yield* Harness.eventsOf(two, session.id, from, (all) => all.some((p) => Harness.errorName(p) === "RunnerLost")).pipe(
        Effect.timeout("30 seconds")
      )
      expect(seen.map(Harness.errorName).filter((n) => n !== undefined)).toEqual(["RunnerLost"])
      expect((yield* conversations(model)).length).toBe(2)
      const redo = yield* Effect.exit(two.registry.prompt(session.id, "two", { messageID: cut }))
      expect(Exit.isFailure(redo) && JSON.stringify(redo.cause)).toContain("RunnerLost")

      const third = yield* two.registry.prompt(session.id, "three")
      expect(third.parts.flatMap((p) => (p.type === "text" ? [p.text] : []))).toContain("Third answer.")
      const request = yield* model.awaitRequest(2, FakeModel.isConversation)
      expect(FakeModel.messagesText(request)).toContain("First answer.")
      expect(FakeModel.messagesText(request)).not.toContain("Cut short.")
    }))
})
