/**
 * The session routes added with the HttpApi, driven by @opencode-ai/sdk
 * 1.19.3 through its root (v1) and `./v2` clients, against the real CLI and
 * FakeModel.
 */
import { describe, expect, it } from "@effect/vitest"
import { createOpencodeClient as createV1 } from "@opencode-ai/sdk"
import { createOpencodeClient as createV2 } from "@opencode-ai/sdk/v2"
import { FakeModel } from "@skein/testkit"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Harness from "./harness.js"

const { collectUntil } = Harness

const texts = (parts: ReadonlyArray<{ readonly type: string; readonly text?: string }>) =>
  parts.flatMap((p) => (p.type === "text" && p.text !== undefined ? [p.text] : []))

/** skein's session info carries the CLI's UUID beside opencode's fields. */
const cliOf = (session: object) => ("cliSessionId" in session && typeof session.cliSessionId === "string" ? session.cliSessionId : "")

const archived = (server: Harness.Running, session: object) =>
  Fs.existsSync(Path.join(server.dirs.configDir, "skein", "serve", "archive", `${cliOf(session)}.jsonl`))

describe("skein serve's session routes through @opencode-ai/sdk", () => {
  it.scopedLive("v2: PATCH, async then sync prompt, one message, fork before a message, children, summarize, DELETE", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.text("First answer."), FakeModel.text("Second answer."), FakeModel.text("Fork answer.")]
      })
      const server = yield* Harness.start(model)
      const client = createV2({ baseUrl: server.url, headers: server.headers, directory: server.dirs.cwd })
      const r = yield* Effect.promise(async () => {
        const session = (await client.session.create({ title: "v2" })).data!
        const sessionID = session.id
        const renamed = (await client.session.update({ sessionID, title: "renamed" })).data!
        const { stream } = await client.event.subscribe()
        const idle = collectUntil(stream, (e) => e.type === "session.idle" && e.properties["sessionID"] === sessionID)
        const accepted = await client.session.promptAsync({ sessionID, messageID: "msg_client", parts: [{ type: "text", text: "one" }] })
        await idle
        const reply = (await client.session.prompt({ sessionID, parts: [{ type: "text", text: "two" }] })).data!
        const messages = (await client.session.messages({ sessionID })).data!
        const latest = (await client.session.messages({ sessionID, limit: 2 })).data!
        const one = (await client.session.message({ sessionID, messageID: messages[1]!.info.id })).data!
        const fork = (await client.session.fork({ sessionID, messageID: messages[2]!.info.id })).data!
        const children = (await client.session.children({ sessionID })).data!
        const forkBefore = (await client.session.messages({ sessionID: fork.id })).data!
        const forkReply = (await client.session.prompt({ sessionID: fork.id, parts: [{ type: "text", text: "three" }] })).data!
        const summarized = (await client.session.summarize({ sessionID, providerID: "anthropic", modelID: "default" })).data
        const compacted = (await client.session.messages({ sessionID })).data!
        const afterDelete = (await client.event.subscribe()).stream
        const deletion = collectUntil(afterDelete, (e) =>
          e.type === "session.deleted" && (e.properties["info"] as { id?: string } | undefined)?.id === fork.id)
        const deleted = (await client.session.delete({ sessionID: fork.id })).data
        const deletedEvent = (await deletion).at(-1)
        const listed = (await client.session.list()).data!
        const gone = await client.session.get({ sessionID: fork.id })
        return {
          session,
          renamed,
          accepted: { status: accepted.response.status, id: accepted.response.headers.get("x-skein-message-id") },
          reply,
          messages,
          latest,
          one,
          fork,
          children,
          forkBefore,
          forkReply,
          summarized,
          compacted,
          deleted,
          deletedEvent,
          listed,
          gone: gone.response.status
        }
      })
      expect(r.renamed.title).toBe("renamed")
      expect(r.accepted).toEqual({ status: 204, id: "msg_client" })
      expect(texts(r.reply.parts)).toEqual(["Second answer."])
      expect(r.messages.map((m) => m.info.role)).toEqual(["user", "assistant", "user", "assistant"])
      expect(r.latest.map((m) => m.info.id)).toEqual(r.messages.slice(2).map((m) => m.info.id))
      expect(r.one.info.id).toBe(r.messages[1]!.info.id)
      expect(texts(r.one.parts)).toEqual(["First answer."])
      expect(r.fork.parentID).toBe(r.session.id)
      expect(r.children.map((s) => s.id)).toEqual([r.fork.id])
      // Everything before the second prompt, under the fork's own ids.
      expect(r.forkBefore.map((m) => m.info.role)).toEqual(["user", "assistant"])
      expect(texts(r.forkBefore[1]!.parts)).toEqual(["First answer."])
      expect(texts(r.forkReply.parts)).toEqual(["Fork answer."])
      const forkRequest = yield* model.awaitRequest(2, FakeModel.isConversation)
      expect(FakeModel.messagesText(forkRequest)).toContain("First answer.")
      expect(FakeModel.messagesText(forkRequest)).not.toContain("Second answer.")
      expect(r.summarized).toBe(true)
      yield* model.awaitRequest(0, FakeModel.isCompaction)
      expect(r.compacted.flatMap((m) => m.parts).some((p) => p.type === "compaction")).toBe(true)
      expect(r.deleted).toBe(true)
      // Clients drop it from their lists on the event, not only at the next list.
      expect(r.deletedEvent?.properties["info"]).toMatchObject({ id: r.fork.id, title: r.fork.title, parentID: r.session.id })
      expect(r.listed.map((s) => s.id)).toContain(r.session.id)
      expect(r.listed.map((s) => s.id)).not.toContain(r.fork.id)
      expect(r.gone).toBe(404)
      expect(archived(server, r.fork)).toBe(true)
    }))

  it.scopedLive("v1: sync prompt with a permission answered on the legacy route (the tool runs), abort mid-stream, fork, summarize, DELETE", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.toolUse("Bash", { command: "touch v1-made.txt" }),
          FakeModel.text("Done."),
          FakeModel.withDelay(FakeModel.text("one two three four five six seven eight nine ten ".repeat(20)), "100 millis")
        ]
      })
      const server = yield* Harness.start(model)
      const client = createV1({ baseUrl: server.url, headers: server.headers })
      const r = yield* Effect.promise(async () => {
        const session = (await client.session.create({ body: { title: "v1" } })).data!
        const id = session.id
        const answers: Array<number> = []
        const first = await client.event.subscribe()
        const asked = collectUntil(first.stream, async (e) => {
          if (e.type === "permission.asked") {
            const permissionID = String(e.properties["id"])
            const answer = await client.postSessionIdPermissionsPermissionId({ path: { id, permissionID }, body: { response: "once" } })
            answers.push(answer.response.status)
          }
          return e.type === "session.idle"
        })
        const reply = (await client.session.prompt({ path: { id }, body: { parts: [{ type: "text", text: "Make the file" }] } })).data!
        await asked
        const second = await client.event.subscribe()
        const aborts: Array<unknown> = []
        const aborted = collectUntil(second.stream, async (e) => {
          if (e.type === "message.part.delta" && aborts.length === 0) aborts.push((await client.session.abort({ path: { id } })).data)
          return e.type === "session.idle"
        })
        await client.session.promptAsync({ path: { id }, body: { parts: [{ type: "text", text: "count" }] } })
        const abortEvents = await aborted
        const messages = (await client.session.messages({ path: { id } })).data!
        const one = (await client.session.message({ path: { id, messageID: messages[0]!.info.id } })).data!
        const updated = (await client.session.update({ path: { id }, body: { title: "v1 renamed" } })).data!
        const fork = (await client.session.fork({ path: { id }, body: {} })).data!
        const forkMessages = (await client.session.messages({ path: { id: fork.id } })).data!
        const children = (await client.session.children({ path: { id } })).data!
        const summarized = (await client.session.summarize({ path: { id }, body: { providerID: "anthropic", modelID: "default" } })).data
        const deleted = (await client.session.delete({ path: { id } })).data
        const gone = await client.session.get({ path: { id } })
        return { session, answers, reply, aborts, abortEvents, messages, one, updated, fork, forkMessages, children, summarized, deleted, gone: gone.response.status }
      })
      expect(r.answers).toEqual([200])
      expect(Fs.existsSync(Path.join(server.dirs.cwd, "v1-made.txt"))).toBe(true)
      const afterTool = yield* model.awaitRequest(1, FakeModel.isConversation)
      expect(JSON.stringify(afterTool.body)).toContain("tool_result")
      expect(texts(r.reply.parts)).toEqual(["Done."])
      expect(r.aborts).toEqual([true])
      expect(r.abortEvents.filter((e) => e.type === "session.idle")).toHaveLength(1)
      expect(r.messages[0]!.info.role).toBe("user")
      expect(r.one.info.id).toBe(r.messages[0]!.info.id)
      expect(r.updated.title).toBe("v1 renamed")
      expect(r.fork.parentID).toBe(r.session.id)
      // A fork without messageID takes the whole conversation.
      expect(r.forkMessages.map((m) => m.info.role)).toEqual(r.messages.map((m) => m.info.role))
      expect(r.children.map((s) => s.id)).toEqual([r.fork.id])
      expect(r.summarized).toBe(true)
      expect(r.deleted).toBe(true)
      expect(r.gone).toBe(404)
      expect(archived(server, r.session)).toBe(true)
    }))
})
