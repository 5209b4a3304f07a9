/**
 * The host's prompts show live, under the ids the history gives them: the
 * CLI does not print what it reads from stdin, so skein names each prompt's
 * user message and the CLI keeps that name in its transcript. A prompt sent
 * while a turn runs shows at the idle that lets the CLI read it.
 */
import { describe, expect, it } from "@effect/vitest"
import { createOpencodeClient } from "@opencode-ai/sdk/v2"
import { FakeModel } from "@skein/testkit"
import { Effect } from "effect"
import * as Harness from "./harness.js"

interface Seen {
  readonly type: string
  readonly properties: { readonly [key: string]: unknown }
}

const infoOf = (e: Seen) => e.properties["info"] as { readonly id: string; readonly role: string }
const partOf = (e: Seen) => e.properties["part"] as { readonly id: string; readonly messageID: string; readonly type: string; readonly text?: string }

describe("live prompts through skein serve with the real CLI", () => {
  it.scopedLive("a prompt to an idle session and one queued behind a busy turn show live with the history's ids", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.withDelay(FakeModel.text("First answer."), "600 millis"), FakeModel.text("Second answer.")]
      })
      const server = yield* Harness.start(model)
      const client = createOpencodeClient({ baseUrl: server.url, headers: server.headers, directory: server.dirs.cwd })
      const { messages, seen } = yield* Effect.promise(async () => {
        const session = (await client.session.create({})).data!
        const { stream } = await client.event.subscribe()
        let idles = 0
        const events = Harness.collectUntil(stream, (e) => e.type === "session.idle" && ++idles === 2)
        await client.session.promptAsync({ sessionID: session.id, parts: [{ type: "text", text: "one" }] })
        // The first turn is still waiting for its delayed reply: this one queues.
        await client.session.promptAsync({ sessionID: session.id, parts: [{ type: "text", text: "two" }] })
        const seen = (await events) as ReadonlyArray<Seen>
        return { seen, messages: (await client.session.messages({ sessionID: session.id })).data! }
      })
      const liveUsers = seen.filter((e) => e.type === "message.updated" && infoOf(e).role === "user").map((e) => infoOf(e).id)
      const liveTexts = seen.filter((e) => e.type === "message.part.updated" && partOf(e).type === "text" && liveUsers.includes(partOf(e).messageID))
        .map((e) => [partOf(e).messageID, partOf(e).id, partOf(e).text])
      expect(messages.map((m) => m.info.role)).toEqual(["user", "assistant", "user", "assistant"])
      const users = messages.filter((m) => m.info.role === "user")
      expect(liveUsers).toEqual(users.map((m) => m.info.id))
      expect(liveTexts).toEqual(users.map((m) => {
        const part = m.parts[0]!
        return [m.info.id, part.id, part.type === "text" ? part.text : undefined]
      }))
      // Each shows where the transcript has it: before the reply it asked for.
      const order = seen.flatMap((e) => {
        if (e.type === "message.updated" && infoOf(e).role === "user") return [`user ${infoOf(e).id}`]
        if (e.type === "message.part.updated" && partOf(e).type === "text" && partOf(e).text !== "" && !liveUsers.includes(partOf(e).messageID)) {
          return [`reply ${partOf(e).text}`]
        }
        return []
      }).filter((x, i, all) => all.indexOf(x) === i)
      expect(order).toEqual([`user ${users[0]!.info.id}`, "reply First answer.", `user ${users[1]!.info.id}`, "reply Second answer."])
    }))
  it.scopedLive("a client that loads the session mid-turn finds the prompt it was shown, and then the reply once", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.withDelay(FakeModel.text("Late answer."), "800 millis")] })
      const server = yield* Harness.start(model)
      const client = createOpencodeClient({ baseUrl: server.url, headers: server.headers, directory: server.dirs.cwd })
      type Listed = NonNullable<Awaited<ReturnType<typeof client.session.messages>>["data"]>
      const { after, midTurn, seen } = yield* Effect.promise(async () => {
        const session = (await client.session.create({})).data!
        const { stream } = await client.event.subscribe()
        let midTurn: Listed | undefined
        // As opencode's TUI does when it opens a session whose prompt it just sent:
        // it loads the list and replaces what it holds with it.
        const events = Harness.collectUntil(stream, async (e) => {
          if (midTurn === undefined && e.type === "message.updated" && infoOf(e as Seen).role === "user") {
            midTurn = (await client.session.messages({ sessionID: session.id })).data!
          }
          return e.type === "session.idle"
        })
        await client.session.promptAsync({ sessionID: session.id, parts: [{ type: "text", text: "Are you there?" }] })
        const seen = (await events) as ReadonlyArray<Seen>
        return { seen, midTurn: midTurn!, after: (await client.session.messages({ sessionID: session.id })).data! }
      })
      const liveUser = seen.find((e) => e.type === "message.updated" && infoOf(e).role === "user")!
      expect(midTurn[0]?.info.id).toBe(infoOf(liveUser).id)
      expect(midTurn[0]?.parts.map((p) => (p.type === "text" ? p.text : p.type))).toEqual(["Are you there?"])
      expect(after.map((m) => m.info.role)).toEqual(["user", "assistant"])
      expect(after[0]?.info.id).toBe(infoOf(liveUser).id)
      // Nothing listed mid-turn is gone or renamed once the transcript has the turn.
      for (const m of midTurn) expect(after.map((a) => a.info.id)).toContain(m.info.id)
      // Every live copy of the reply is dated: a message created at 0 shows twice in the TUI.
      const replies = seen.filter((e) => e.type === "message.updated" && infoOf(e).role === "assistant")
      expect(replies.length).toBeGreaterThan(0)
      for (const e of replies) expect((e.properties["info"] as { readonly time: { readonly created: number } }).time.created).toBeGreaterThan(0)
    }))
})
