/**
 * How many tokens a piece of history costs.
 *
 * Compaction decides where to cut from these counts, so they must be cheap:
 * the default is a local estimate (about four characters a token, a fixed
 * price for images and documents), which is what the CLI's own thresholds
 * are tuned against. `layerCountTokens` asks the API's `count_tokens`
 * instead, for callers that need exact figures and accept a request per count.
 *
 * @since 0.0.0
 */
import * as HttpBody from "@effect/platform/HttpBody"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type { Anthropic } from "@skein/protocol"
import { Context, Effect, Layer, Schema } from "effect"

/**
 * Counting failed (only the API counter can fail).
 *
 * @since 0.0.0
 */
export class TokenCountError extends Schema.TaggedError<TokenCountError>()("TokenCountError", {
  message: Schema.String
}) {}

/**
 * @since 0.0.0
 */
export class TokenCounter extends Context.Tag("@skein/compact/TokenCounter")<TokenCounter, {
  /** Tokens of these messages as one request's history. */
  readonly count: (messages: ReadonlyArray<Anthropic.MessageParam>) => Effect.Effect<number, TokenCountError>
}>() {}

/** Characters per token of the estimate. */
const charsPerToken = 4
/** What an image or a document costs in the estimate, whatever its size. */
const attachmentTokens = 2000

const textTokens = (text: string): number => Math.ceil(text.length / charsPerToken)

const blockTokens = (block: Anthropic.ContentBlock): number => {
  if (!("type" in block)) return 0
  switch (block.type) {
    case "text":
      return "text" in block && typeof block.text === "string" ? textTokens(block.text) : 0
    case "thinking":
      return "thinking" in block && typeof block.thinking === "string" ? textTokens(block.thinking) : 0
    case "image":
    case "document":
      return attachmentTokens
    case "tool_result": {
      if (!("content" in block)) return 0
      const content = block.content
      if (typeof content === "string") return textTokens(content)
      if (Array.isArray(content)) return content.reduce((sum: number, inner: Anthropic.ContentBlock) => sum + blockTokens(inner), 0)
      return 0
    }
    default:
      // tool_use input, redacted thinking, server blocks: their JSON is what the model reads.
      return textTokens(JSON.stringify(block))
  }
}

/**
 * The local estimate of one message. Pure, so planners can call it in a loop.
 *
 * @since 0.0.0
 */
export const estimateMessage = (message: Anthropic.MessageParam): number =>
  typeof message.content === "string"
    ? textTokens(message.content)
    : message.content.reduce((sum, block) => sum + blockTokens(block), 0)

/**
 * The local estimate of a history.
 *
 * @since 0.0.0
 */
export const estimate = (messages: ReadonlyArray<Anthropic.MessageParam>): number =>
  messages.reduce((sum, message) => sum + estimateMessage(message), 0)

/**
 * The local estimate of a text.
 *
 * @since 0.0.0
 */
export const estimateText = textTokens

/**
 * The fast estimate; never fails, never does IO.
 *
 * @since 0.0.0
 */
export const estimator: TokenCounter["Type"] = TokenCounter.of({
  count: (messages) => Effect.succeed(estimate(messages))
})

/**
 * @since 0.0.0
 */
export const layer: Layer.Layer<TokenCounter> = Layer.succeed(TokenCounter, estimator)

const CountResponse = Schema.Struct({ input_tokens: Schema.Number })

/**
 * Counts with the API's `POST /v1/messages/count_tokens` at `baseUrl`.
 *
 * @since 0.0.0
 */
export const makeCountTokens = (options: {
  readonly baseUrl: string
  readonly apiKey: string
  readonly model: string
}) =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const url = `${options.baseUrl.replace(/\/$/, "")}/v1/messages/count_tokens`
    const count = Effect.fn("TokenCounter.countTokens")(function*(messages: ReadonlyArray<Anthropic.MessageParam>) {
      // The endpoint takes user and assistant turns only; system messages count as user text.
      const body = {
        model: options.model,
        messages: messages.map((m) => ({ role: m.role === "assistant" ? "assistant" : "user", content: m.content }))
      }
      const request = HttpClientRequest.post(url).pipe(
        HttpClientRequest.setHeaders({ "x-api-key": options.apiKey, "anthropic-version": "2023-06-01" }),
        HttpClientRequest.setBody(HttpBody.unsafeJson(body))
      )
      const response = yield* client.execute(request)
      if (response.status !== 200) return yield* new TokenCountError({ message: `count_tokens answered ${response.status}` })
      const decoded = yield* response.json.pipe(Effect.flatMap(Schema.decodeUnknown(CountResponse)))
      return decoded.input_tokens
    }, Effect.catchAll((error) =>
      error._tag === "TokenCountError" ? Effect.fail(error) : Effect.fail(new TokenCountError({ message: String(error) }))
    ))
    return TokenCounter.of({ count })
  })

/**
 * @since 0.0.0
 */
export const layerCountTokens = (options: Parameters<typeof makeCountTokens>[0]): Layer.Layer<TokenCounter, never, HttpClient.HttpClient> =>
  Layer.effect(TokenCounter, makeCountTokens(options))
