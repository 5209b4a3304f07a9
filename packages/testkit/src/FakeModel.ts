/**
 * A scripted Anthropic Messages API server that the real Claude Code CLI
 * accepts. It answers `POST /v1/messages` (SSE or JSON) and
 * `POST /v1/messages/count_tokens`, records every request, and plays a
 * queue of replies, including faults (529, 500, a dropped connection).
 *
 * @since 0.0.0
 */
import type { ServeError } from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Anthropic } from "@skein/protocol"
import type { Scope } from "effect"
import { Context, Duration, Effect, Layer, Option, Predicate, Ref, Schema, Stream, SubscriptionRef } from "effect"
import { dual } from "effect/Function"
import * as Http from "node:http"
import * as internal from "./internal/reply.js"

// ---------------------------------------------------------------------------
// Recording
// ---------------------------------------------------------------------------

/**
 * One HTTP request as the server received it.
 *
 * @since 0.0.0
 */
export interface RecordedRequest {
  /** Position in arrival order, from 0. */
  readonly index: number
  readonly method: string
  /** Path and query string as sent, e.g. `/v1/messages?beta=true`. */
  readonly url: string
  /** Path without the query string. */
  readonly path: string
  readonly headers: Readonly<Record<string, string>>
  /** The parsed JSON body; the raw text if it is not JSON; undefined if empty. */
  readonly body: unknown
  /** The body, when this is a `/v1/messages` request and it validates. */
  readonly messagesRequest: Option.Option<Anthropic.MessagesRequest>
}

/**
 * A predicate on requests, used to route replies.
 *
 * @since 0.0.0
 */
export type RequestMatch = (request: RecordedRequest) => boolean

const lastUserText = (body: Anthropic.MessagesRequest): string => {
  const last = body.messages[body.messages.length - 1]
  if (last === undefined || last.role !== "user") return ""
  return typeof last.content === "string"
    ? last.content
    : last.content.flatMap((block) => block.type === "text" && "text" in block ? [block.text] : []).join("\n")
}

/**
 * The text of a request's last user message: a session's prompt in its first
 * request. The CLI may close the list with a message of its own (role
 * "system"), so this is the last *user* message, not the last message.
 *
 * @since 0.0.0
 */
export const promptOf = (request: RecordedRequest): string =>
  Option.match(request.messagesRequest, {
    onNone: () => "",
    onSome: (body) => {
      const last = body.messages.findLast((m) => m.role === "user")
      if (last === undefined) return ""
      return typeof last.content === "string"
        ? last.content
        : last.content.flatMap((block) => block.type === "text" && "text" in block ? [block.text] : []).join("\n")
    }
  })

/**
 * A summarizing-compaction request: the CLI's compaction prompt (asking for
 * an `<analysis>` and a `<summary>` block) is the last user message. It is
 * otherwise shaped like a conversation request (streaming, same tools).
 *
 * @since 0.0.0
 */
export const isCompaction: RequestMatch = (request) =>
  Option.match(request.messagesRequest, {
    onNone: () => false,
    onSome: (body) => {
      const text = lastUserText(body)
      return text.includes("<summary>") && /summary of the conversation/i.test(text)
    }
  })

/**
 * The default match of a scripted reply: a streaming `/v1/messages` request
 * that offers tools and is not a compaction. The CLI's main conversation
 * always streams with tools; side calls that do not are answered by the
 * fallback instead of eating the script, and so are compaction requests
 * (script those with `compactSummary`).
 *
 * @since 0.0.0
 */
export const isConversation: RequestMatch = (request) =>
  Option.match(request.messagesRequest, {
    onNone: () => false,
    onSome: (body) => body.stream === true && (body.tools?.length ?? 0) > 0 && !isCompaction(request)
  })

/**
 * Any `/v1/messages` request.
 *
 * @since 0.0.0
 */
export const anyMessages: RequestMatch = (request) => Option.isSome(request.messagesRequest)

/**
 * All text a request's messages carry (string contents and text blocks, of
 * every role), joined by newlines: handy for asserting what the CLI sent.
 *
 * @since 0.0.0
 */
export const messagesText = (request: RecordedRequest): string =>
  Option.match(request.messagesRequest, {
    onNone: () => "",
    onSome: (body) =>
      body.messages.flatMap((message) =>
        typeof message.content === "string"
          ? [message.content]
          : message.content.flatMap((block) => block.type === "text" && "text" in block ? [block.text] : [])
      ).join("\n")
  })

// ---------------------------------------------------------------------------
// Replies
// ---------------------------------------------------------------------------

/**
 * A block of a scripted message.
 *
 * @since 0.0.0
 */
export type Block = internal.Block

interface ReplyCommon {
  /** Which requests this reply may answer; defaults to `isConversation`. */
  readonly match: RequestMatch
}

/**
 * A successful assistant message.
 *
 * @since 0.0.0
 */
export interface MessageReply extends ReplyCommon {
  readonly _tag: "Message"
  readonly blocks: ReadonlyArray<Block>
  /** Defaults to `tool_use` when a block is a tool use, else `end_turn`. */
  readonly stopReason: string | undefined
  /** Overrides of the computed usage. */
  readonly usage: Partial<Anthropic.Usage>
  /** Pause before each content_block_delta (uses the Clock, so TestClock applies). */
  readonly delay: Duration.Duration
  /** Close the connection after this many SSE events (or before the JSON body). */
  readonly dropAfterEvents: number | undefined
}

/**
 * An HTTP error with the API's JSON error body.
 *
 * @since 0.0.0
 */
export interface ErrorReply extends ReplyCommon {
  readonly _tag: "Error"
  readonly status: number
  readonly errorType: string
  readonly message: string
  /** Sent as `retry-after-ms` (and `retry-after`) so clients retry promptly. */
  readonly retryAfterMs: number | undefined
}

/**
 * @since 0.0.0
 */
export type Reply = MessageReply | ErrorReply

const message = (blocks: ReadonlyArray<Block>): MessageReply => ({
  _tag: "Message",
  blocks,
  stopReason: undefined,
  usage: {},
  delay: Duration.zero,
  dropAfterEvents: undefined,
  match: isConversation
})

/**
 * A message with one text block.
 *
 * @since 0.0.0
 */
export const text = (text: string): MessageReply => message([{ _tag: "Text", text }])

/**
 * A message with one thinking block.
 *
 * @since 0.0.0
 */
export const thinking = (thinking: string, signature = "fake-signature"): MessageReply =>
  message([{ _tag: "Thinking", thinking, signature }])

/**
 * A message with one tool_use block; its stop reason is `tool_use`.
 *
 * @since 0.0.0
 */
export const toolUse = (
  name: string,
  input: Readonly<Record<string, unknown>>,
  options?: { readonly id?: string | undefined }
): MessageReply => message([{ _tag: "ToolUse", id: options?.id, name, input }])

/**
 * One message made of the blocks of several, in order:
 * `FakeModel.combine(FakeModel.thinking("hmm"), FakeModel.text("Let me look."), FakeModel.toolUse("Bash", { command: "ls" }))`.
 *
 * @since 0.0.0
 */
export const combine = (...replies: ReadonlyArray<MessageReply>): MessageReply =>
  message(replies.flatMap((reply) => reply.blocks))

const httpError = (status: number, errorType: string, message: string): ErrorReply => ({
  _tag: "Error",
  status,
  errorType,
  message,
  retryAfterMs: undefined,
  match: isConversation
})

/**
 * HTTP 529 with `overloaded_error`, as the API answers under load.
 *
 * @since 0.0.0
 */
export const overloaded: ErrorReply = httpError(529, "overloaded_error", "Overloaded")

/**
 * HTTP 500 with `api_error`.
 *
 * @since 0.0.0
 */
export const serverError: ErrorReply = httpError(500, "api_error", "Internal server error")

/**
 * Any HTTP error with the API's error body.
 *
 * @since 0.0.0
 */
export const error = (status: number, errorType: string, message: string): ErrorReply =>
  httpError(status, errorType, message)

/**
 * A text reply whose connection is closed after message_start, the ping,
 * content_block_start and one delta: the stream never reaches message_stop.
 *
 * @since 0.0.0
 */
export const dropMidStream: MessageReply = {
  ...text("This reply is cut off before it ends."),
  dropAfterEvents: 4
}

/**
 * The answer to a compaction request, in the shape the CLI parses: an
 * `<analysis>` block, then the `<summary>`.
 *
 * @since 0.0.0
 */
export const compactSummary = (summary: string): MessageReply => ({
  ...text(`<analysis>\nThe conversation so far, in brief.\n</analysis>\n\n<summary>\n${summary}\n</summary>`),
  match: isCompaction
})

/**
 * Restricts which requests a reply answers.
 *
 * @since 0.0.0
 */
export const matching: {
  (match: RequestMatch): <R extends Reply>(self: R) => R
  <R extends Reply>(self: R, match: RequestMatch): R
} = dual(2, <R extends Reply>(self: R, match: RequestMatch): R => ({ ...self, match }))

/**
 * Pauses before every delta of the reply.
 *
 * @since 0.0.0
 */
export const withDelay: {
  (delay: Duration.DurationInput): (self: MessageReply) => MessageReply
  (self: MessageReply, delay: Duration.DurationInput): MessageReply
} = dual(2, (self: MessageReply, delay: Duration.DurationInput): MessageReply => ({
  ...self,
  delay: Duration.decode(delay)
}))

/**
 * @since 0.0.0
 */
export const withStopReason: {
  (stopReason: string): (self: MessageReply) => MessageReply
  (self: MessageReply, stopReason: string): MessageReply
} = dual(2, (self: MessageReply, stopReason: string): MessageReply => ({ ...self, stopReason }))

/**
 * @since 0.0.0
 */
export const withUsage: {
  (usage: Partial<Anthropic.Usage>): (self: MessageReply) => MessageReply
  (self: MessageReply, usage: Partial<Anthropic.Usage>): MessageReply
} = dual(2, (self: MessageReply, usage: Partial<Anthropic.Usage>): MessageReply => ({
  ...self,
  usage: { ...self.usage, ...usage }
}))

/**
 * Closes the connection after `events` SSE events.
 *
 * @since 0.0.0
 */
export const dropAfter: {
  (events: number): (self: MessageReply) => MessageReply
  (self: MessageReply, events: number): MessageReply
} = dual(2, (self: MessageReply, events: number): MessageReply => ({ ...self, dropAfterEvents: events }))

/**
 * @since 0.0.0
 */
export const withRetryAfter: {
  (millis: number): (self: ErrorReply) => ErrorReply
  (self: ErrorReply, millis: number): ErrorReply
} = dual(2, (self: ErrorReply, millis: number): ErrorReply => ({ ...self, retryAfterMs: millis }))

/**
 * Answers requests no scripted reply matches: a chosen reply, or a function
 * of the request.
 *
 * @since 0.0.0
 */
export type Fallback = Reply | ((request: RecordedRequest) => Reply)

const friendly = text(
  "Hello! I'm skein's fake model. Everything is working, and I'm happy to help with whatever you need."
)
const defaultSummary = compactSummary(
  "1. Primary Request and Intent: a short friendly conversation.\n2. Pending Tasks: none."
)

/**
 * The default fallback: a valid summary for compaction requests, a friendly
 * text reply for everything else.
 *
 * @since 0.0.0
 */
export const defaultFallback: Fallback = (request) => isCompaction(request) ? defaultSummary : friendly

// ---------------------------------------------------------------------------
// Service
// ---------------------------------------------------------------------------

/**
 * @since 0.0.0
 */
export interface Options {
  /** Replies to play, in order. More can be enqueued later. */
  readonly replies?: Iterable<Reply> | undefined
  /** Answers requests no scripted reply matches; `defaultFallback` if omitted. */
  readonly fallback?: Fallback | undefined
  /** Defaults to 0 (a free port). */
  readonly port?: number | undefined
}

/**
 * @since 0.0.0
 */
export class FakeModel extends Context.Tag("@skein/testkit/FakeModel")<FakeModel, {
  /** `http://127.0.0.1:<port>`, for `ANTHROPIC_BASE_URL`. */
  readonly url: string
  readonly port: number
  /** Every request received so far, in arrival order. */
  readonly requests: Effect.Effect<ReadonlyArray<RecordedRequest>>
  /** Appends replies to the script. */
  readonly enqueue: (...replies: ReadonlyArray<Reply>) => Effect.Effect<void>
  /** Scripted replies not played yet. */
  readonly remaining: Effect.Effect<ReadonlyArray<Reply>>
  /** Waits for the n-th request (from 0) among those `filter` accepts (default: all). */
  readonly awaitRequest: (n: number, filter?: RequestMatch) => Effect.Effect<RecordedRequest>
}>() {}

const isMessagesRequest = Schema.is(Anthropic.MessagesRequest)

const jsonHeaders = (requestId: string) => ({ "request-id": requestId })

const parseBody = (text: string): unknown => {
  if (text.length === 0) return undefined
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

const apiError = (status: number, errorType: string, message: string, requestId: string, extra?: Record<string, string>) =>
  HttpServerResponse.unsafeJson(
    { type: "error", error: { type: errorType, message }, request_id: requestId },
    { status, headers: { ...jsonHeaders(requestId), ...extra } }
  )

/** Closes the client's connection without finishing the response. */
const dropConnection = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.sync(() => {
    NodeHttpServerRequest.toIncomingMessage(request).socket.end()
  })

/**
 * Starts a FakeModel on 127.0.0.1; it stops when the scope closes.
 *
 * @since 0.0.0
 */
export const make = Effect.fn("FakeModel.make")(function*(
  options: Options = {}
): Effect.fn.Return<FakeModel["Type"], ServeError, Scope.Scope> {
  const log = yield* SubscriptionRef.make<ReadonlyArray<RecordedRequest>>([])
  const script = yield* Ref.make<ReadonlyArray<Reply>>(Array.from(options.replies ?? []))
  const counter = yield* Ref.make(0)
  const fallback = options.fallback ?? defaultFallback
  const nextId = Ref.getAndUpdate(counter, (n) => n + 1).pipe(
    Effect.map((n) => String(n + 1).padStart(4, "0"))
  )

  const take = (request: RecordedRequest) =>
    Ref.modify(script, (replies): readonly [Reply, ReadonlyArray<Reply>] => {
      const at = replies.findIndex((reply) => reply.match(request))
      return at === -1
        ? [typeof fallback === "function" ? fallback(request) : fallback, replies]
        : [replies[at]!, [...replies.slice(0, at), ...replies.slice(at + 1)]]
    })

  const respondMessages = (
    raw: HttpServerRequest.HttpServerRequest,
    request: RecordedRequest,
    body: Anthropic.MessagesRequest,
    bodyChars: number
  ) =>
    Effect.gen(function*() {
      const id = yield* nextId
      const requestId = `req_fake_${id}`
      const reply = yield* take(request)
      if (reply._tag === "Error") {
        const retry = reply.retryAfterMs === undefined ? undefined : {
          "retry-after-ms": String(reply.retryAfterMs),
          "retry-after": String(Math.ceil(reply.retryAfterMs / 1000))
        }
        return apiError(reply.status, reply.errorType, reply.message, requestId, retry)
      }
      const rendered = internal.render({
        id: `msg_fake_${id}`,
        model: body.model,
        blocks: reply.blocks,
        toolUseId: (index) => `toolu_fake_${id}_${index}`,
        stopReason: reply.stopReason,
        usage: reply.usage,
        inputTokens: internal.estimateTokens(bodyChars)
      })
      if (body.stream !== true) {
        if (reply.dropAfterEvents !== undefined) {
          yield* dropConnection(raw)
        }
        return HttpServerResponse.unsafeJson(rendered.message, { headers: jsonHeaders(requestId) })
      }
      const events = reply.dropAfterEvents === undefined
        ? rendered.events
        : rendered.events.slice(0, reply.dropAfterEvents)
      const encoder = new TextEncoder()
      const frames = Stream.fromIterable(events).pipe(
        Stream.mapEffect((event) =>
          event.type === "content_block_delta" && Duration.greaterThan(reply.delay, Duration.zero)
            ? Effect.as(Effect.sleep(reply.delay), event)
            : Effect.succeed(event)
        ),
        Stream.map((event) => encoder.encode(internal.sseFrame(event)))
      )
      const stream = reply.dropAfterEvents === undefined
        ? frames
        : Stream.concat(frames, Stream.execute(dropConnection(raw)))
      return HttpServerResponse.stream(stream, {
        contentType: "text/event-stream; charset=utf-8",
        headers: { "cache-control": "no-cache", "request-id": requestId }
      })
    })

  const app = Effect.gen(function*() {
    const raw = yield* HttpServerRequest.HttpServerRequest
    const text = yield* Effect.orElseSucceed(raw.text, () => "")
    const body = parseBody(text)
    const url = new URL(raw.url, "http://127.0.0.1")
    const path = url.pathname
    const isMessages = raw.method === "POST" && path === "/v1/messages"
    const recorded = yield* SubscriptionRef.modify(log, (requests): readonly [RecordedRequest, ReadonlyArray<RecordedRequest>] => {
      const request: RecordedRequest = {
        index: requests.length,
        method: raw.method,
        url: raw.url,
        path,
        headers: raw.headers,
        body,
        messagesRequest: isMessages && isMessagesRequest(body) ? Option.some(body) : Option.none()
      }
      return [request, [...requests, request]]
    })
    if (isMessages) {
      return yield* Option.match(recorded.messagesRequest, {
        onNone: () =>
          Effect.succeed(
            apiError(400, "invalid_request_error", "FakeModel: the body is not a valid Messages request", "req_fake_invalid")
          ),
        onSome: (request) => respondMessages(raw, recorded, request, text.length)
      })
    }
    if (raw.method === "POST" && path === "/v1/messages/count_tokens") {
      return HttpServerResponse.unsafeJson({ input_tokens: internal.estimateTokens(text.length) })
    }
    return apiError(404, "not_found_error", `FakeModel: no route for ${raw.method} ${path}`, "req_fake_404")
  })

  const server = yield* NodeHttpServer.make(() => Http.createServer(), { port: options.port ?? 0, host: "127.0.0.1" })
  yield* server.serve(app)
  const port = server.address._tag === "TcpAddress" ? server.address.port : 0

  return FakeModel.of({
    url: `http://127.0.0.1:${port}`,
    port,
    requests: SubscriptionRef.get(log),
    enqueue: (...replies) => Ref.update(script, (script) => [...script, ...replies]),
    remaining: Ref.get(script),
    awaitRequest: (n, filter = Predicate.isNotNullable) =>
      log.changes.pipe(
        Stream.filterMap((requests) => Option.fromNullable(requests.filter(filter)[n])),
        Stream.runHead,
        Effect.flatMap(Effect.orDie)
      )
  })
})

/**
 * @since 0.0.0
 */
export const layer = (options: Options = {}): Layer.Layer<FakeModel, ServeError> =>
  Layer.scoped(FakeModel, make(options))
