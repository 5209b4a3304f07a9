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
import { badRequest, PromptBody, ServeApi } from "../../ServeApi.js"
import * as Discovery from "../discovery.js"
import { ServerEvents } from "../../ServerEvents.js"
import { SessionRegistry } from "../../SessionRegistry.js"
import { contentOf } from "../promptContent.js"
import { decodeBody, orWire } from "./common.js"

/**
 * The prompt's own fields, honoured or refused by name: `model` switches the
 * CLI's model (one `/provider` lists), `agent` is the one agent there is;
 * a per-prompt `system` prompt and `noReply` (store without a turn) have no
 * Claude Code equivalent on a running session.
 */
const promptFields = (input: typeof PromptBody.Type) =>
  Effect.gen(function*() {
    if (input.system !== undefined && input.system !== "") {
      return yield* Effect.fail(badRequest("system: a per-prompt system prompt is not supported; Claude Code takes its system prompt when it starts"))
    }
    if (input.noReply === true) {
      return yield* Effect.fail(badRequest("noReply: storing a prompt without a turn is not supported; Claude Code answers every prompt"))
    }
    if (input.agent !== undefined && !Discovery.agents.some((a) => a.name === input.agent)) {
      return yield* Effect.fail(badRequest(`agent: ${input.agent} is not an agent of this server (${Discovery.agents.map((a) => a.name).join(", ")})`))
    }
    const model = input.model
    if (model === undefined) return undefined
    if (model.providerID !== Discovery.provider.id || !Discovery.models.some((m) => m.id === model.modelID)) {
      return yield* Effect.fail(badRequest(
        `model: ${model.providerID}/${model.modelID} is not one this server can switch to (${Discovery.models.map((m) => `anthropic/${m.id}`).join(", ")})`
      ))
    }
    return model.modelID === "default" ? null : model.modelID
  })

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
        const model = yield* promptFields(input)
        const session = yield* orWire(registry.get(sessionID))
        const content = yield* contentOf(input.parts, session.directory).pipe(Effect.provideService(FileSystem.FileSystem, fs))
        return { input, content, options: { messageID: input.messageID, model } }
      })
    return handlers
      .handle("list", ({ path, urlParams }) => Effect.map(orWire(registry.messages(path.sessionID)), latest(urlParams.limit)))
      .handle("get", ({ path }) => orWire(registry.message(path.sessionID, path.messageID)))
      .handleRaw("prompt", ({ path, request }) =>
        Effect.flatMap(
          promptOf(path.sessionID, request),
          ({ content, options }) => orWire(registry.prompt(path.sessionID, content, options))
        ).pipe(
          // Subscribers get the turn's events before its answer (`opencode run` exits on the answer).
          Effect.tap(() => events.delivered("2 seconds"))
        ))
      .handleRaw("promptAsync", ({ path, request }) =>
        Effect.gen(function*() {
          const { content, options } = yield* promptOf(path.sessionID, request)
          const messageID = yield* orWire(registry.promptAsync(path.sessionID, content, options))
          return HttpServerResponse.empty({ status: 204, headers: { "x-skein-message-id": messageID } })
        }))
  }))
