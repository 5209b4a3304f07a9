/**
 * `/session` and `/session/:id`: the registry's sessions, their children
 * (forks), todo list, fork, compaction and abort.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import { CreateBody, Directory, ForkBody, ServeApi, SummarizeBody, UpdateBody } from "../../ServeApi.js"
import { SessionRegistry } from "../../SessionRegistry.js"
import { decodeBody, orWire } from "./common.js"

export const layer = HttpApiBuilder.group(ServeApi, "sessions", (handlers) =>
  Effect.gen(function*() {
    const registry = yield* SessionRegistry
    return handlers
      .handle("list", () => Effect.flatMap(Directory, (dir) => orWire(registry.list(dir))))
      .handleRaw("create", ({ request }) =>
        Effect.gen(function*() {
          const directory = yield* Directory
          // The v1 client may post no body at all.
          const input = yield* decodeBody(CreateBody, {})(request)
          return yield* orWire(registry.create({ directory, title: input.title }))
        }))
      .handle("status", () => registry.status)
      .handle("get", ({ path }) => orWire(registry.get(path.sessionID)))
      .handleRaw("update", ({ path, request }) =>
        Effect.flatMap(decodeBody(UpdateBody)(request), (patch) => orWire(registry.update(path.sessionID, patch))))
      .handle("remove", ({ path }) => orWire(Effect.as(registry.remove(path.sessionID), true)))
      .handle("children", ({ path }) => orWire(registry.children(path.sessionID)))
      .handle("todo", ({ path }) => orWire(registry.todo(path.sessionID)))
      .handle("diff", ({ path }) => orWire(Effect.as(registry.get(path.sessionID), [])))
      .handleRaw("fork", ({ path, request }) =>
        Effect.flatMap(decodeBody(ForkBody, {})(request), (input) => orWire(registry.fork(path.sessionID, input))))
      .handleRaw("summarize", ({ path, request }) =>
        // The model is the CLI's own; `providerID`/`modelID` are accepted and not used.
        Effect.zipRight(decodeBody(SummarizeBody, {})(request), orWire(Effect.as(registry.summarize(path.sessionID), true))))
      .handle("abort", ({ path }) => orWire(registry.abort(path.sessionID)))
  }))
