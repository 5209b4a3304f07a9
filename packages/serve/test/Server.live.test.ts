import { describe, expect, it } from "@effect/vitest"
import { createOpencodeClient as createV1 } from "@opencode-ai/sdk"
import { createOpencodeClient as createV2 } from "@opencode-ai/sdk/v2"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Exit, Scope } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Harness from "./harness.js"

const { collectUntil } = Harness


describe("skein serve with the real CLI, driven by @opencode-ai/sdk", () => {
  it.scopedLive("v2: create, prompt synchronously, stream to session.idle, list messages", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.text("Hello from FakeModel.")] })
      const server = yield* Harness.start(model)
      const client = createV2({ baseUrl: server.url, headers: server.headers, directory: server.dirs.cwd })
      const result = yield* Effect.promise(async () => {
        const created = await client.session.create({ title: "first" })
        const session = created.data!
        const { stream } = await client.event.subscribe()
        const events = collectUntil(stream, (e) => e.type === "session.idle" && e.properties["sessionID"] === session.id)
        const reply = await client.session.prompt({ sessionID: session.id, parts: [{ type: "text", text: "Say hello" }] })
        const seen = await events
        const messages = await client.session.messages({ sessionID: session.id })
        const listed = await client.session.list()
        return { session, reply: reply.data!, seen, messages: messages.data!, listed: listed.data! }
      })
      expect(result.session.id).toMatch(/^ses_/)
      expect(result.session.directory).toBe(server.dirs.cwd)
      expect(result.reply.info.role).toBe("assistant")
      const text = result.reply.parts.flatMap((p) => (p.type === "text" ? [p.text] : []))
      expect(text).toEqual(["Hello from FakeModel."])
      const types = result.seen.map((e) => e.type)
      expect(types[0]).toBe("server.connected")
      expect(types).toContain("message.part.delta")
      expect(types.indexOf("session.status")).toBeLessThan(types.lastIndexOf("session.idle"))
      expect(result.messages.map((m) => m.info.role)).toEqual(["user", "assistant"])
      expect(result.messages[1]!.info.id).toBe(result.reply.info.id)
      expect(result.listed.map((s) => s.id)).toContain(result.session.id)
    }))

  it.scopedLive("v1: prompt_async returns 204 at once, the events reach session.idle with the text", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.text("Async hello.")] })
      const server = yield* Harness.start(model)
      const client = createV1({ baseUrl: server.url, headers: server.headers })
      const result = yield* Effect.promise(async () => {
        const session = (await client.session.create({ body: { title: "async" } })).data!
        const { stream } = await client.event.subscribe()
        const events = collectUntil(stream, (e) => e.type === "session.idle" && e.properties["sessionID"] === session.id)
        const accepted = await client.session.promptAsync({ path: { id: session.id }, body: { parts: [{ type: "text", text: "hi" }] } })
        return { status: accepted.response.status, seen: await events }
      })
      expect(result.status).toBe(204)
      const finals = result.seen.flatMap((e) => {
        const part = e.properties["part"] as { type?: string; text?: string } | undefined
        return e.type === "message.part.updated" && part?.type === "text" && part.text !== "" ? [part.text] : []
      })
      expect(finals).toContain("Async hello.")
    }))

  it.scopedLive("a permission answered from the client lets the tool run; a second answer is an error", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.toolUse("Bash", { command: "touch made-by-skein.txt" }), FakeModel.text("Done.")]
      })
      const server = yield* Harness.start(model)
      const client = createV2({ baseUrl: server.url, headers: server.headers, directory: server.dirs.cwd })
      const result = yield* Effect.promise(async () => {
        const session = (await client.session.create({})).data!
        const { stream } = await client.event.subscribe()
        const replies: Array<number> = []
        const events = collectUntil(stream, async (e) => {
          if (e.type === "permission.asked") {
            const requestID = String(e.properties["id"])
            const listed = await client.permission.list()
            replies.push(listed.data!.length)
            const first = await client.permission.reply({ requestID, reply: "once" })
            replies.push(first.response.status)
            const again = await client.permission.reply({ requestID, reply: "once" })
            replies.push(again.response.status)
          }
          return e.type === "session.idle"
        })
        const reply = await client.session.prompt({ sessionID: session.id, parts: [{ type: "text", text: "Make the file" }] })
        return { reply: reply.data!, replies, seen: await events }
      })
      expect(result.replies).toEqual([1, 200, 404])
      expect(Fs.existsSync(Path.join(server.dirs.cwd, "made-by-skein.txt"))).toBe(true)
      expect(result.reply.parts.flatMap((p) => (p.type === "text" ? [p.text] : []))).toEqual(["Done."])
      expect(result.seen.map((e) => e.type)).toContain("permission.replied")
    }))

  it.scopedLive("abort mid-stream ends the turn at idle; abort is idempotent", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.withDelay(FakeModel.text("one two three four five six seven eight nine ten ".repeat(20)), "100 millis")]
      })
      const server = yield* Harness.start(model)
      const client = createV2({ baseUrl: server.url, headers: server.headers, directory: server.dirs.cwd })
      const result = yield* Effect.promise(async () => {
        const session = (await client.session.create({})).data!
        const { stream } = await client.event.subscribe()
        const aborts: Array<unknown> = []
        const events = collectUntil(stream, async (e) => {
          if (e.type === "message.part.delta" && aborts.length === 0) {
            aborts.push((await client.session.abort({ sessionID: session.id })).data)
          }
          return e.type === "session.idle"
        })
        await client.session.promptAsync({ sessionID: session.id, parts: [{ type: "text", text: "count" }] })
        const seen = await events
        aborts.push((await client.session.abort({ sessionID: session.id })).data)
        return { aborts, seen }
      })
      expect(result.aborts).toEqual([true, true])
      expect(result.seen.filter((e) => e.type === "session.idle")).toHaveLength(1)
    }))

  it.scopedLive("an ask no client answers is re-announced to a late subscriber, then denied with the reason; the turn goes on", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.toolUse("Bash", { command: "touch never.txt" }), FakeModel.text("Went on.")]
      })
      const server = yield* Harness.start(model, { permissionTimeout: "3 seconds" })
      const client = createV2({ baseUrl: server.url, headers: server.headers, directory: server.dirs.cwd })
      const result = yield* Effect.promise(async () => {
        const session = (await client.session.create({})).data!
        await client.session.promptAsync({ sessionID: session.id, parts: [{ type: "text", text: "Try the tool" }] })
        let pending = (await client.permission.list()).data!
        while (pending.length === 0) {
          await new Promise((r) => setTimeout(r, 100))
          pending = (await client.permission.list()).data!
        }
        // Connects only now: the ask reaches it anyway.
        const { stream } = await client.event.subscribe()
        const seen = await collectUntil(stream, (e) => e.type === "session.idle")
        return { pending, seen }
      })
      const asked = result.seen.find((e) => e.type === "permission.asked")
      expect(asked?.properties["id"]).toBe(result.pending[0]!.id)
      const replied = result.seen.find((e) => e.type === "permission.replied")
      expect(replied?.properties["reply"]).toBe("reject")
      expect(Fs.existsSync(Path.join(server.dirs.cwd, "never.txt"))).toBe(false)
      const followUp = yield* model.awaitRequest(1, FakeModel.isConversation)
      expect(JSON.stringify(followUp.body)).toContain("no client answered within 3s: denied by the server")
    }))

  it.scopedLive("a session left by an earlier server is listed from its transcript, and prompting it resumes it", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.text("First answer."), FakeModel.text("Second answer.")] })
      const dirs = yield* ClaudeCli.offlineDirs("skein-serve-resume-")
      const first = yield* Scope.make()
      const server = yield* Harness.start(model, { dirs }).pipe(Scope.extend(first))
      const before = yield* Effect.promise(async () => {
        const client = createV2({ baseUrl: server.url, headers: server.headers, directory: dirs.cwd })
        const session = (await client.session.create({})).data!
        await client.session.prompt({ sessionID: session.id, parts: [{ type: "text", text: "one" }] })
        return session
      })
      yield* Scope.close(first, Exit.void)

      const again = yield* Harness.start(model, { dirs })
      const result = yield* Effect.promise(async () => {
        const client = createV2({ baseUrl: again.url, headers: again.headers, directory: dirs.cwd })
        const listed = (await client.session.list()).data!
        const reply = (await client.session.prompt({ sessionID: before.id, parts: [{ type: "text", text: "two" }] })).data!
        const messages = (await client.session.messages({ sessionID: before.id })).data!
        return { listed, reply, messages }
      })
      expect(result.listed.map((s) => s.id)).toContain(before.id)
      expect(result.reply.parts.flatMap((p) => (p.type === "text" ? [p.text] : []))).toEqual(["Second answer."])
      expect(result.messages.map((m) => m.info.role)).toEqual(["user", "assistant", "user", "assistant"])
      const second = yield* model.awaitRequest(1, FakeModel.isConversation)
      expect(FakeModel.messagesText(second)).toContain("First answer.")
    }))
})
