import { describe, expect, it } from "@effect/vitest"
import { Anthropic } from "@skein/protocol"
import { Effect, Fiber, Option, Schema, TestClock } from "effect"
import * as FakeModel from "../src/FakeModel.js"

interface Frame {
  readonly event: string
  readonly data: unknown
}

const parseSse = (text: string): ReadonlyArray<Frame> => {
  expect(text.endsWith("\n\n")).toBe(true)
  return text.slice(0, -2).split("\n\n").map((frame) => {
    const lines = frame.split("\n")
    expect(lines).toHaveLength(2)
    expect(lines[0]!.startsWith("event: ")).toBe(true)
    expect(lines[1]!.startsWith("data: ")).toBe(true)
    return { event: lines[0]!.slice(7), data: JSON.parse(lines[1]!.slice(6)) as unknown }
  })
}

const conversation = (text: string, extra: Record<string, unknown> = {}) => ({
  model: "claude-test-1",
  max_tokens: 1024,
  stream: true,
  system: [{ type: "text", text: "You are a test." }],
  tools: [{ name: "Bash", description: "Run a command", input_schema: { type: "object" } }],
  messages: [{ role: "user", content: [{ type: "text", text }] }],
  ...extra
})

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  Effect.promise(() =>
    fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": "sk-test", ...headers },
      body: JSON.stringify(body)
    })
  )

const readText = (response: Response) => Effect.promise(() => response.text())

const isEvent = Schema.is(Anthropic.MessageStreamEvent)
const isMessage = Schema.is(Anthropic.Message)

const deltas = (frames: ReadonlyArray<Frame>) =>
  frames.flatMap((frame) => {
    const data = frame.data
    return isEvent(data) && data.type === "content_block_delta" ? [data.delta] : []
  })

describe("FakeModel", () => {
  it.scoped("streams SSE frames in the API's order", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.combine(
            FakeModel.thinking("I should list the files first.", "sig-1"),
            FakeModel.text("Let me look at the files in this directory for you."),
            FakeModel.toolUse("Bash", { command: "ls -la", description: "List files" }, { id: "toolu_1" })
          )
        ]
      })
      const response = yield* post(`${model.url}/v1/messages?beta=true`, conversation("list files"))
      expect(response.status).toBe(200)
      expect(response.headers.get("content-type")).toContain("text/event-stream")
      const frames = parseSse(yield* readText(response))
      for (const frame of frames) {
        expect(isEvent(frame.data)).toBe(true)
        expect(frame.data).toMatchObject({ type: frame.event })
      }
      const names = frames.map((frame) => frame.event)
      expect(names.slice(0, 3)).toEqual(["message_start", "content_block_start", "ping"])
      expect(names.slice(-2)).toEqual(["message_delta", "message_stop"])
      expect(names.filter((name) => name === "content_block_start")).toHaveLength(3)
      expect(names.filter((name) => name === "content_block_stop")).toHaveLength(3)

      const all = deltas(frames)
      const text = all.flatMap((delta) => delta.type === "text_delta" && "text" in delta ? [delta.text] : [])
      expect(text.length).toBeGreaterThan(2)
      expect(text.join("")).toBe("Let me look at the files in this directory for you.")
      const thinking = all.flatMap((delta) =>
        delta.type === "thinking_delta" && "thinking" in delta ? [delta.thinking] : []
      )
      expect(thinking.join("")).toBe("I should list the files first.")
      expect(all).toContainEqual({ type: "signature_delta", signature: "sig-1" })
      const json = all.flatMap((delta) =>
        delta.type === "input_json_delta" && "partial_json" in delta ? [delta.partial_json] : []
      )
      expect(JSON.parse(json.join(""))).toEqual({ command: "ls -la", description: "List files" })
      expect(frames[frames.length - 2]!.data).toMatchObject({
        type: "message_delta",
        delta: { stop_reason: "tool_use", stop_sequence: null }
      })
      expect(frames[0]!.data).toMatchObject({ message: { model: "claude-test-1", content: [], stop_reason: null } })
      expect(yield* model.remaining).toEqual([])
    }))

  it.scoped("answers a non-streaming request with a JSON message", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.matching(FakeModel.text("A title"), FakeModel.anyMessages)] })
      const response = yield* post(`${model.url}/v1/messages`, conversation("name this", { stream: false }))
      expect(response.status).toBe(200)
      const body: unknown = yield* Effect.promise(() => response.json())
      expect(isMessage(body)).toBe(true)
      expect(body).toMatchObject({
        type: "message",
        role: "assistant",
        model: "claude-test-1",
        content: [{ type: "text", text: "A title" }],
        stop_reason: "end_turn"
      })
    }))

  it.scoped("side calls fall through to the fallback and keep the script", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.text("scripted")],
        fallback: FakeModel.matching(FakeModel.text("fallback"), FakeModel.anyMessages)
      })
      const side = yield* post(`${model.url}/v1/messages`, {
        model: "claude-haiku",
        max_tokens: 32,
        messages: [{ role: "user", content: "title?" }]
      })
      expect(yield* Effect.promise(() => side.json())).toMatchObject({ content: [{ type: "text", text: "fallback" }] })
      expect(yield* model.remaining).toHaveLength(1)
      const main = parseSse(yield* readText(yield* post(`${model.url}/v1/messages`, conversation("hi"))))
      const text = deltas(main).flatMap((delta) => delta.type === "text_delta" && "text" in delta ? [delta.text] : [])
      expect(text.join("")).toBe("scripted")
      expect(yield* model.remaining).toEqual([])
    }))

  it.scoped("answers count_tokens", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make()
      const response = yield* post(`${model.url}/v1/messages/count_tokens?beta=true`, {
        model: "claude-test-1",
        messages: [{ role: "user", content: "hello" }]
      })
      expect(response.status).toBe(200)
      const body: unknown = yield* Effect.promise(() => response.json())
      expect(body).toEqual({ input_tokens: expect.any(Number) })
    }))

  it.scoped("answers and records unknown routes with 404", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make()
      const response = yield* Effect.promise(() => fetch(`${model.url}/v1/models?limit=5`))
      expect(response.status).toBe(404)
      expect(yield* Effect.promise(() => response.json())).toMatchObject({
        type: "error",
        error: { type: "not_found_error" }
      })
      const [request] = yield* model.requests
      expect(request).toMatchObject({ method: "GET", url: "/v1/models?limit=5", path: "/v1/models", body: undefined })
      expect(request!.messagesRequest).toEqual(Option.none())
    }))

  it.scoped("plays 529 and 500 with the API's error body", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.withRetryAfter(FakeModel.overloaded, 10), FakeModel.serverError, FakeModel.text("ok")]
      })
      const first = yield* post(`${model.url}/v1/messages`, conversation("a"))
      expect(first.status).toBe(529)
      expect(first.headers.get("retry-after-ms")).toBe("10")
      const firstBody: unknown = yield* Effect.promise(() => first.json())
      expect(Schema.is(Anthropic.ErrorEvent)(firstBody)).toBe(true)
      expect(firstBody).toMatchObject({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } })
      const second = yield* post(`${model.url}/v1/messages`, conversation("a"))
      expect(second.status).toBe(500)
      expect(yield* Effect.promise(() => second.json())).toMatchObject({ error: { type: "api_error" } })
      const third = yield* post(`${model.url}/v1/messages`, conversation("a"))
      expect(third.status).toBe(200)
      yield* readText(third)
    }))

  it.scoped("drops the connection mid-stream", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.dropMidStream] })
      const response = yield* post(`${model.url}/v1/messages`, conversation("a"))
      expect(response.status).toBe(200)
      const reader = response.body!.getReader()
      const decoder = new TextDecoder()
      let received = ""
      const failure = yield* Effect.promise(async () => {
        try {
          for (;;) {
            const { done, value } = await reader.read()
            if (done) return undefined
            received += decoder.decode(value, { stream: true })
          }
        } catch (error) {
          return error
        }
      })
      expect(failure).toBeInstanceOf(Error)
      const frames = parseSse(received)
      expect(frames.map((frame) => frame.event)).toEqual([
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta"
      ])
      // A non-streaming request with a drop gets no response at all.
      yield* model.enqueue(FakeModel.matching(FakeModel.dropMidStream, FakeModel.anyMessages))
      const unanswered = yield* Effect.promise(() =>
        fetch(`${model.url}/v1/messages`, {
          method: "POST",
          body: JSON.stringify(conversation("again", { stream: false }))
        }).then(() => "answered", (error: unknown) => error)
      )
      expect(unanswered).toBeInstanceOf(Error)
      // The server keeps serving after a drop.
      const next = yield* post(`${model.url}/v1/messages`, conversation("again"))
      expect(next.status).toBe(200)
      yield* readText(next)
    }))

  it.scoped("records method, path, headers and the decoded body", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make()
      const waiting = yield* Effect.fork(model.awaitRequest(1))
      yield* readText(yield* post(`${model.url}/v1/messages?beta=true`, conversation("first prompt")))
      yield* readText(
        yield* post(`${model.url}/v1/messages?beta=true`, conversation("second prompt"), { "anthropic-beta": "x-1" })
      )
      const second = yield* Fiber.join(waiting)
      expect(second).toMatchObject({ index: 1, method: "POST", url: "/v1/messages?beta=true", path: "/v1/messages" })
      expect(second.headers["anthropic-beta"]).toBe("x-1")
      expect(second.headers["x-api-key"]).toBe("sk-test")
      const body = Option.getOrThrow(second.messagesRequest)
      expect(body.system).toEqual([{ type: "text", text: "You are a test." }])
      expect(body.tools?.map((tool) => tool.name)).toEqual(["Bash"])
      expect(FakeModel.messagesText(second)).toBe("second prompt")
      const requests = yield* model.requests
      expect(requests.map(FakeModel.messagesText)).toEqual(["first prompt", "second prompt"])
      const firstMatching = yield* model.awaitRequest(0, (request) => FakeModel.messagesText(request) === "second prompt")
      expect(firstMatching.index).toBe(1)
    }))

  it.scoped("paces deltas with the Clock", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.withDelay(FakeModel.text("one two three four five six"), "1 hour")]
      })
      const reading = yield* Effect.fork(
        Effect.flatMap(post(`${model.url}/v1/messages`, conversation("slow")), readText)
      )
      // Advance the TestClock until the response completes: real time alone would never get there.
      const advance = TestClock.adjust("1 hour").pipe(
        Effect.zipRight(Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))),
        Effect.zipRight(Fiber.poll(reading))
      )
      const done = yield* advance.pipe(Effect.repeat({ until: Option.isSome }))
      expect(Option.isSome(done)).toBe(true)
      const frames = parseSse(yield* Fiber.join(reading))
      expect(deltas(frames)).toHaveLength(3)
      const now = yield* TestClock.currentTimeMillis
      expect(now).toBeGreaterThanOrEqual(3 * 3_600_000)
    }))

  it.scoped("stops serving when its scope closes", () =>
    Effect.gen(function*() {
      const url = yield* Effect.scoped(Effect.map(FakeModel.make(), (model) => model.url))
      const result = yield* Effect.promise(() => fetch(`${url}/v1/models`).then(() => "served", () => "refused"))
      expect(result).toBe("refused")
    }))

  it.scoped("routes compaction requests to compactSummary, and the default fallback summarizes too", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.compactSummary("The user said hi."), FakeModel.text("conversation reply")]
      })
      const prompt = "Your task is to create a detailed summary of the conversation so far. " +
        "Reply with an <analysis> block followed by a <summary> block."
      const textOf = (frames: ReadonlyArray<Frame>) =>
        deltas(frames).flatMap((delta) => delta.type === "text_delta" && "text" in delta ? [delta.text] : []).join("")
      // The compaction request takes the summary even though a conversation reply is queued first.
      const compaction = parseSse(yield* readText(yield* post(`${model.url}/v1/messages`, conversation(prompt))))
      expect(textOf(compaction)).toContain("<summary>\nThe user said hi.\n</summary>")
      const [first] = yield* model.requests
      expect(FakeModel.isCompaction(first!)).toBe(true)
      expect(FakeModel.isConversation(first!)).toBe(false)
      // With the script spent, the default fallback still answers compaction with a summary.
      const again = parseSse(yield* readText(yield* post(`${model.url}/v1/messages`, conversation(prompt))))
      expect(textOf(again)).toMatch(/^<analysis>[\s\S]*<\/analysis>\n\n<summary>[\s\S]*<\/summary>$/)
      const main = parseSse(yield* readText(yield* post(`${model.url}/v1/messages`, conversation("hello"))))
      expect(textOf(main)).toBe("conversation reply")
    }))

  it.scoped("accepts a fallback that depends on the request", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        fallback: (request) => FakeModel.text(`echo: ${FakeModel.messagesText(request)}`)
      })
      const body: unknown = yield* Effect.promise(() =>
        fetch(`${model.url}/v1/messages`, {
          method: "POST",
          body: JSON.stringify(conversation("ping", { stream: false }))
        }).then((response) => response.json())
      )
      expect(body).toMatchObject({ content: [{ type: "text", text: "echo: ping" }] })
    }))

  it.scoped("rejects a body that is not a Messages request with 400 and records it", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make()
      const response = yield* post(`${model.url}/v1/messages`, { model: "m", messages: "nope" })
      expect(response.status).toBe(400)
      expect(yield* Effect.promise(() => response.json())).toMatchObject({ error: { type: "invalid_request_error" } })
      const [request] = yield* model.requests
      expect(request!.body).toEqual({ model: "m", messages: "nope" })
      expect(Option.isNone(request!.messagesRequest)).toBe(true)
    }))

  it.scoped("is a service provided by its layer", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.FakeModel
      expect(model.url).toBe(`http://127.0.0.1:${model.port}`)
      const response = yield* post(`${model.url}/v1/messages`, conversation("hi", { stream: false }))
      expect(yield* Effect.promise(() => response.json())).toMatchObject({ content: [{ type: "text", text: "from the layer" }] })
    }).pipe(Effect.provide(FakeModel.layer({ replies: [FakeModel.matching(FakeModel.text("from the layer"), FakeModel.anyMessages)] }))))
})
