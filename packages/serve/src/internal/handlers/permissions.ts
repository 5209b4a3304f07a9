/**
 * Permission asks (`PermissionBroker`) and the CLI's `AskUserQuestion`
 * questions (the registry's): listed while pending, answered once.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { PermissionBroker } from "../../PermissionBroker.js"
import { Directory, LegacyPermissionBody, PermissionReplyBody, QuestionReplyBody, ServeApi } from "../../ServeApi.js"
import { SessionRegistry } from "../../SessionRegistry.js"
import { decodeBody, orWire } from "./common.js"

export const layer = HttpApiBuilder.group(ServeApi, "permissions", (handlers) =>
  Effect.gen(function*() {
    const broker = yield* PermissionBroker
    return handlers
      .handle("list", () => Effect.flatMap(Directory, (dir) => Effect.map(broker.pending(dir), (all) => all.map((p) => p.request))))
      .handleRaw("reply", ({ path, request }) =>
        Effect.flatMap(decodeBody(PermissionReplyBody)(request), (body) => orWire(Effect.as(broker.reply(path.requestID, body), true))))
      .handleRaw("legacyReply", ({ path, request }) =>
        Effect.flatMap(
          decodeBody(LegacyPermissionBody)(request),
          ({ response }) => orWire(Effect.as(broker.reply(path.permissionID, { reply: response }), true))
        ))
  }))

export const questionsLayer = HttpApiBuilder.group(ServeApi, "questions", (handlers) =>
  Effect.gen(function*() {
    const registry = yield* SessionRegistry
    return handlers
      .handle("list", () => Effect.flatMap(Directory, registry.questions))
      .handleRaw("reply", ({ path, request }) =>
        Effect.flatMap(
          decodeBody(QuestionReplyBody)(request),
          ({ answers }) => orWire(Effect.as(registry.answer(path.requestID, { _tag: "Answered", answers }), true))
        ))
      .handle("reject", ({ path }) =>
        orWire(Effect.as(registry.answer(path.requestID, { _tag: "Rejected", reason: "the user dismissed the question" }), true)))
  }))
