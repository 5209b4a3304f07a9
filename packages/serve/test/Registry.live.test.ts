/**
 * The registry's lifecycle and the CLI's own tools behind the routes, with
 * the real CLI and FakeModel: a session stopped when idle and woken by the
 * next prompt, prompts queued behind a busy session, `AskUserQuestion`
 * answered from a client, the todo list from `TodoWrite`, a live session's
 * `session.updated` events keeping its title (and a rename) and creation time,
 * and an unnamed session named by its first prompt.
 */
import { describe, expect, it } from "@effect/vitest"
import { createOpencodeClient as createV2 } from "@opencode-ai/sdk/v2"
import { Canonical } from "@skein/protocol"
import { FakeModel } from "@skein/testkit"
import { Effect, Option, Schedule, Schema } from "effect"
import { titleFrom } from "../src/SessionRegistry.js"
import * as Harness from "./harness.js"

const { collectUntil } = Harness
type AnyEvent = Harness.AnyEvent

const idles = (seen: ReadonlyArray<AnyEvent>) => seen.filter((e) => e.type === "session.idle").length

const decodeInfo = Schema.decodeUnknownOption(Canonical.SessionInfo)

/** The `session.updated` infos of one session; the translator's carry the CLI's `model`, the registry's do not. */
const updatesOf = (seen: ReadonlyArray<AnyEvent>, sessionID: string) =>
  seen.flatMap((e) => {
    const info = e.type === "session.updated" ? decodeInfo(e.properties["info"]) : Option.none()
    return Option.isSome(info) && info.value.id === sessionID ? [info.value] : []
  })

describe("the session registry with the real CLI", () => {
  it.scopedLive("an idle session stops after idleTimeout; prompt_async wakes it (--resume), and queues behind a busy turn", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.text("First answer."),
          FakeModel.withDelay(FakeModel.text("Second answer, slowly."), "300 millis"),
          FakeModel.text("Third answer.")
        ]
      })
      const server = yield* Harness.start(model, { idleTimeout: "1 second" })
      const client = createV2({ baseUrl: server.url, headers: server.headers, directory: server.dirs.cwd })
      const session = yield* Effect.promise(async () => (await client.session.create({})).data!)
      yield* Effect.promise(() => client.session.prompt({ sessionID: session.id, parts: [{ type: "text", text: "one" }] }))
      expect(yield* server.registry.running).toEqual([session.id])
      // Stopped by the idle timer alone: nothing else stops it in this test.
      yield* server.registry.running.pipe(
        Effect.repeat({ until: (ids) => !ids.includes(session.id), schedule: Schedule.spaced("100 millis") }),
        Effect.timeout("30 seconds")
      )
      const woken = yield* Effect.promise(async () => {
        const { stream } = await client.event.subscribe()
        let count = 0
        const events = collectUntil(stream, (e) => e.type === "session.idle" && ++count === 2)
        const first = await client.session.promptAsync({ sessionID: session.id, parts: [{ type: "text", text: "two" }] })
        const second = await client.session.promptAsync({ sessionID: session.id, parts: [{ type: "text", text: "three" }] })
        const seen = await events
        const messages = (await client.session.messages({ sessionID: session.id })).data!
        return { statuses: [first.response.status, second.response.status], seen, messages }
      })
      expect(woken.statuses).toEqual([204, 204])
      expect(idles(woken.seen)).toBe(2)
      expect(woken.messages.map((m) => m.info.role)).toEqual(["user", "assistant", "user", "assistant", "user", "assistant"])
      // The resumed translator knows the session as the registry does: named by its first
      // prompt (it had opencode's default title), which later prompts leave alone.
      expect(session.title).toMatch(/^New session - /)
      const resumedInfos = updatesOf(woken.seen, session.id)
      expect(resumedInfos.filter((i) => i.model !== undefined).length).toBeGreaterThan(0)
      for (const info of resumedInfos) expect(info).toMatchObject({ title: "one", time: { created: session.time.created } })
      const named = yield* Effect.promise(async () => (await client.session.get({ sessionID: session.id })).data!)
      expect(named.title).toBe("one")
      const resumed = yield* model.awaitRequest(1, FakeModel.isConversation)
      expect(FakeModel.messagesText(resumed)).toContain("First answer.")
      const queued = yield* model.awaitRequest(2, FakeModel.isConversation)
      expect(FakeModel.messagesText(queued)).toContain("Second answer, slowly.")
    }))

  it.scopedLive("AskUserQuestion is a question: listed, answered once from the client, and the CLI gets the answer", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.toolUse("AskUserQuestion", {
            questions: [{
              question: "Which color?",
              header: "Color",
              options: [{ label: "Red", description: "warm" }, { label: "Blue", description: "cool" }],
              multiSelect: false
            }]
          }),
          FakeModel.text("Blue it is.")
        ]
      })
      // The tool is offered only without --bare.
      const server = yield* Harness.start(model, { bare: false })
      const client = createV2({ baseUrl: server.url, headers: server.headers, directory: server.dirs.cwd })
      const r = yield* Effect.promise(async () => {
        const session = (await client.session.create({})).data!
        const { stream } = await client.event.subscribe()
        const replies: Array<unknown> = []
        const events = collectUntil(stream, async (e) => {
          if (e.type === "question.asked") {
            const requestID = String(e.properties["id"])
            replies.push((await client.question.list()).data!.map((q) => q.id))
            replies.push((await client.question.reply({ requestID, answers: [["Blue"]] })).response.status)
            replies.push((await client.question.reply({ requestID, answers: [["Red"]] })).response.status)
            replies.push(requestID)
          }
          return e.type === "session.idle"
        })
        const reply = (await client.session.prompt({ sessionID: session.id, parts: [{ type: "text", text: "Ask me" }] })).data!
        return { reply, replies, seen: await events, pending: (await client.question.list()).data! }
      })
      const id = r.replies[3]
      expect(id).toMatch(/^que_/)
      expect(r.replies.slice(0, 3)).toEqual([[id], 200, 404])
      expect(r.seen.map((e) => e.type)).toContain("question.replied")
      expect(r.pending).toEqual([])
      const followUp = yield* model.awaitRequest(1, FakeModel.isConversation)
      expect(JSON.stringify(followUp.body)).toContain(String.raw`\"Which color?\"=\"Blue\"`)
      expect(r.reply.parts.flatMap((p) => (p.type === "text" ? [p.text] : []))).toEqual(["Blue it is."])
      const messages = yield* Effect.promise(() => client.session.messages({ sessionID: r.reply.info.sessionID }))
      // The call itself is opencode's question tool, with the answer its view lists.
      const call = messages.data!.flatMap((m) => m.parts).find((p) => p.type === "tool")
      expect(call?.type === "tool" && [call.tool, call.state.status]).toEqual(["question", "completed"])
      expect(call?.type === "tool" && call.state.input["questions"]).toEqual([{
        question: "Which color?",
        header: "Color",
        options: [{ label: "Red", description: "warm" }, { label: "Blue", description: "cool" }],
        multiple: false
      }])
      expect(call?.type === "tool" && call.state.status === "completed" && call.state.metadata["answers"]).toEqual([["Blue"]])
    }))

  it.scopedLive("GET /session/:id/todo is the list of the CLI's last TodoWrite", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.toolUse("TodoWrite", {
            todos: [
              { content: "write the test", status: "completed", activeForm: "Writing the test" },
              { content: "run it", status: "in_progress", activeForm: "Running it" }
            ]
          }),
          FakeModel.text("Planned.")
        ]
      })
      const server = yield* Harness.start(model)
      const client = createV2({ baseUrl: server.url, headers: server.headers, directory: server.dirs.cwd })
      const todo = yield* Effect.promise(async () => {
        const session = (await client.session.create({})).data!
        await client.session.prompt({ sessionID: session.id, parts: [{ type: "text", text: "Plan" }] })
        return (await client.session.todo({ sessionID: session.id })).data!
      })
      expect(todo).toEqual([
        { content: "write the test", status: "completed", priority: "medium" },
        { content: "run it", status: "in_progress", priority: "medium" }
      ])
    }))

  it.scopedLive("a live session's session.updated events keep its title and creation time, and take a rename", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.text("First answer."), FakeModel.text("Second answer.")] })
      const server = yield* Harness.start(model)
      const client = createV2({ baseUrl: server.url, headers: server.headers, directory: server.dirs.cwd })
      const r = yield* Effect.promise(async () => {
        const session = (await client.session.create({ title: "Kept title" })).data!
        const { stream } = await client.event.subscribe()
        let count = 0
        const events = collectUntil(stream, async (e) => {
          if (e.type !== "session.idle") return false
          if (++count === 2) return true
          await client.session.update({ sessionID: session.id, title: "New title" })
          await client.session.promptAsync({ sessionID: session.id, parts: [{ type: "text", text: "two" }] })
          return false
        })
        await client.session.promptAsync({ sessionID: session.id, parts: [{ type: "text", text: "one" }] })
        const seen = await events
        const got = (await client.session.get({ sessionID: session.id })).data!
        return { session, seen, got }
      })
      // One CLI process served both turns.
      expect(yield* server.registry.running).toEqual([r.session.id])
      expect(r.session.time.created).toBeGreaterThan(0)
      const renamedAt = r.seen.findIndex((e) => updatesOf([e], r.session.id).some((i) => i.title === "New title"))
      expect(renamedAt).toBeGreaterThan(0)
      const before = updatesOf(r.seen.slice(0, renamedAt), r.session.id)
      const after = updatesOf(r.seen.slice(renamedAt), r.session.id)
      const fromCli = (infos: ReadonlyArray<Canonical.SessionInfo>) => infos.filter((i) => i.model !== undefined)
      expect(fromCli(before).length).toBeGreaterThan(0)
      for (const info of before) {
        expect(info).toMatchObject({ title: "Kept title", projectID: r.session.projectID, version: "skein", time: { created: r.session.time.created } })
      }
      expect(fromCli(after).length).toBeGreaterThan(0)
      for (const info of after) expect(info).toMatchObject({ title: "New title", time: { created: r.session.time.created } })
      expect(r.got).toMatchObject({ id: r.session.id, title: "New title", time: { created: r.session.time.created } })
    }))
})

describe("SessionRegistry.titleFrom", () => {
  it("is a prompt's first line, at most 50 characters; a command or an empty prompt names nothing", () => {
    expect(titleFrom("  Fix the login bug\nIt fails on Safari.")).toBe("Fix the login bug")
    expect(titleFrom("x".repeat(80))).toBe(`${"x".repeat(49)}…`)
    expect(titleFrom("/compact")).toBeUndefined()
    expect(titleFrom("   ")).toBeUndefined()
    expect(titleFrom([{ type: "text", text: "From a block" }])).toBe("From a block")
  })
})
