/**
 * `/session/:id/message`: history through the translator's `History`, the
 * synchronous prompt (answered at the turn's authoritative end) and
 * `prompt_async` (204 once queued, the message id in `x-skein-message-id`).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import type { Anthropic } from "@skein/protocol"
import * as Effect from "effect/Effect"
import { PromptBody, ServeApi } from "../../ServeApi.js"
import { ServerEvents } from "../../ServerEvents.js"
import { SessionRegistry } from "../../SessionRegistry.js"
import { decodeBody, orWire } from "./common.js"

/** Text parts reach the CLI; the others have no Claude Code equivalent here yet. */
const contentOf = (parts: typeof PromptBody.Type["parts"]): ReadonlyArray<Anthropic.ContentBlock> =>
  parts.flatMap((p) => ("text" in p && p.type === "text" ? [{ type: "text" as const, text: p.text }] : []))

/** The latest `limit` messages, as opencode's `?limit=` gives them; all without a positive number. */
const latest = (limit: string | undefined) => <A>(messages: ReadonlyArray<A>): ReadonlyArray<A> => {
  const n = limit === undefined ? Number.NaN : Number.parseInt(limit, 10)
  return Number.isInteger(n) && n > 0 ? messages.slice(-n) : messages
}

export const layer = HttpApiBuilder.group(ServeApi, "messages", (handlers) =>
  Effect.gen(function*() {
    const registry = yield* SessionRegistry
    const events = yield* ServerEvents
    return handlers
      .handle("list", ({ path, urlParams }) => Effect.map(orWire(registry.messages(path.sessionID)), latest(urlParams.limit)))
      .handle("get", ({ path }) => orWire(registry.message(path.sessionID, path.messageID)))
      .handleRaw("prompt", ({ path, request }) =>
        Effect.flatMap(
          decodeBody(PromptBody)(request),
          (input) => orWire(registry.prompt(path.sessionID, contentOf(input.parts), { messageID: input.messageID }))
        ).pipe(
          // Subscribers get the turn's events before its answer (`opencode run` exits on the answer).
          Effect.tap(() => events.delivered("2 seconds"))
        ))
      .handleRaw("promptAsync", ({ path, request }) =>
        Effect.gen(function*() {
          const input = yield* decodeBody(PromptBody)(request)
          const messageID = yield* orWire(registry.promptAsync(path.sessionID, contentOf(input.parts), { messageID: input.messageID }))
          return HttpServerResponse.empty({ status: 204, headers: { "x-skein-message-id": messageID } })
        }))
  }))
