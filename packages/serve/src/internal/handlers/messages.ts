/**
 * `/session/:id/message`: history through the translator's `History`, the
 * synchronous prompt (answered at the turn's authoritative end) and
 * `prompt_async` (204 once queued, the message id in `x-skein-message-id`).
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import { PromptBody, ServeApi } from "../../ServeApi.js"
import { ServerEvents } from "../../ServerEvents.js"
import { SessionRegistry } from "../../SessionRegistry.js"
import { contentOf } from "../promptContent.js"
import { decodeBody, orWire } from "./common.js"

/** The latest `limit` messages, as opencode's `?limit=` gives them; all without a positive number. */
const latest = (limit: string | undefined) => <A>(messages: ReadonlyArray<A>): ReadonlyArray<A> => {
  const n = limit === undefined ? Number.NaN : Number.parseInt(limit, 10)
  return Number.isInteger(n) && n > 0 ? messages.slice(-n) : messages
}

export const layer = HttpApiBuilder.group(ServeApi, "messages", (handlers) =>
  Effect.gen(function*() {
    const registry = yield* SessionRegistry
    const events = yield* ServerEvents
    const fs = yield* FileSystem.FileSystem
    /** The prompt's body and its content, a file part read in the session's directory. */
    const promptOf = (sessionID: string, request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function*() {
        const input = yield* decodeBody(PromptBody)(request)
        const session = yield* orWire(registry.get(sessionID))
        const content = yield* contentOf(input.parts, session.directory).pipe(Effect.provideService(FileSystem.FileSystem, fs))
        return { input, content }
      })
    return handlers
      .handle("list", ({ path, urlParams }) => Effect.map(orWire(registry.messages(path.sessionID)), latest(urlParams.limit)))
      .handle("get", ({ path }) => orWire(registry.message(path.sessionID, path.messageID)))
      .handleRaw("prompt", ({ path, request }) =>
        Effect.flatMap(
          promptOf(path.sessionID, request),
          ({ content, input }) => orWire(registry.prompt(path.sessionID, content, { messageID: input.messageID }))
        ).pipe(
          // Subscribers get the turn's events before its answer (`opencode run` exits on the answer).
          Effect.tap(() => events.delivered("2 seconds"))
        ))
      .handleRaw("promptAsync", ({ path, request }) =>
        Effect.gen(function*() {
          const { content, input } = yield* promptOf(path.sessionID, request)
          const messageID = yield* orWire(registry.promptAsync(path.sessionID, content, { messageID: input.messageID }))
          return HttpServerResponse.empty({ status: 204, headers: { "x-skein-message-id": messageID } })
        }))
  }))
