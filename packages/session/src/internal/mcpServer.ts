/**
 * One in-process MCP server per toolkit and session, answering the JSON-RPC
 * the CLI sends in `mcp_message` requests: `initialize`, `tools/list`,
 * `tools/call`, `ping`, and the notifications (`notifications/cancelled`
 * interrupts the call it names).
 *
 * The CLI's client speaks the MCP protocol; the server side needs only these
 * few methods, so they are decoded with Effect Schema here rather than by an
 * MCP SDK whose server is Promise-based (its handlers could not be
 * interrupted by the session's fibers).
 */
import { Json } from "@skein/protocol"
import { Deferred, Effect, Either, Schema } from "effect"
import * as Tool from "../Tool.js"

/** A toolkit whose tools have their requirements provided. */
export interface Served {
  readonly name: string
  readonly version: string
  readonly tools: ReadonlyArray<{
    readonly definition: Tool.Definition
    readonly call: (args: unknown) => Effect.Effect<Tool.Result>
  }>
}

export interface McpServer {
  readonly name: string
  /** The answer to one JSON-RPC message; a notification gets the empty answer the CLI expects. */
  readonly handle: (message: Json.JsonObject) => Effect.Effect<Json.JsonObject>
}

/** Versions this server speaks, newest first; a client asking for another gets the newest. */
export const protocolVersions: ReadonlyArray<string> = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]

const Id = Schema.Union(Schema.String, Schema.Number)
type Id = typeof Id.Type

const Request = Schema.Struct({
  jsonrpc: Schema.Literal("2.0"),
  id: Id,
  method: Schema.String,
  params: Schema.optional(Json.JsonObject)
})
const Notification = Schema.Struct({
  jsonrpc: Schema.Literal("2.0"),
  method: Schema.String,
  params: Schema.optional(Json.JsonObject)
})
const decodeMessage = Schema.decodeUnknownEither(Schema.Union(Request, Notification))
const InitializeParams = Schema.Struct({ protocolVersion: Schema.String })
const CallParams = Schema.Struct({ name: Schema.String, arguments: Schema.optional(Schema.Unknown) })
const CancelledParams = Schema.Struct({ requestId: Id })

/** JSON-RPC error codes. */
const InvalidRequest = -32600
const MethodNotFound = -32601
const InvalidParams = -32602

const success = (id: Id, result: Json.JsonObject): Json.JsonObject => ({ jsonrpc: "2.0", id, result })
const failure = (id: Id | null, code: number, message: string): Json.JsonObject => ({ jsonrpc: "2.0", id, error: { code, message } })
/** What the Agent SDK answers to a notification; the CLI reads and drops it. */
const acknowledged: Json.JsonObject = { jsonrpc: "2.0", result: {}, id: 0 }

export const make = (served: Served): Effect.Effect<McpServer> =>
  Effect.sync(() => {
    const tools = new Map(served.tools.map((tool) => [tool.definition.name, tool]))
    /** Calls in flight by JSON-RPC id, so `notifications/cancelled` can stop one. */
    const calls = new Map<Id, Deferred.Deferred<void>>()

    const callTool = (id: Id, params: Json.JsonObject | undefined) =>
      Either.match(Schema.decodeUnknownEither(CallParams)(params), {
        onLeft: (e) => Effect.succeed(failure(id, InvalidParams, `tools/call: ${Tool.formatIssues(e)}`)),
        onRight: ({ arguments: args, name }) => {
          const tool = tools.get(name)
          if (tool === undefined) return Effect.succeed(success(id, Tool.toJson(Tool.error(`No tool named ${name} on ${served.name}`))))
          return Effect.acquireUseRelease(
            Effect.tap(Deferred.make<void>(), (cancelled) => Effect.sync(() => calls.set(id, cancelled))),
            (cancelled) =>
              Effect.raceFirst(
                tool.call(args),
                Effect.as(Deferred.await(cancelled), Tool.error(`${name} was cancelled`))
              ),
            () => Effect.sync(() => calls.delete(id))
          ).pipe(Effect.map((r) => success(id, Tool.toJson(r))))
        }
      })

    const request = (id: Id, method: string, params: Json.JsonObject | undefined): Effect.Effect<Json.JsonObject> => {
      switch (method) {
        case "initialize": {
          const asked = Either.getOrUndefined(Schema.decodeUnknownEither(InitializeParams)(params))?.protocolVersion
          return Effect.succeed(success(id, {
            protocolVersion: asked !== undefined && protocolVersions.includes(asked) ? asked : protocolVersions[0],
            capabilities: { tools: {} },
            serverInfo: { name: served.name, version: served.version }
          }))
        }
        case "ping":
          return Effect.succeed(success(id, {}))
        case "tools/list":
          return Effect.succeed(success(id, { tools: served.tools.map((t): Json.JsonObject => ({ ...t.definition })) }))
        case "tools/call":
          return callTool(id, params)
        default:
          return Effect.succeed(failure(id, MethodNotFound, `Method not found: ${method}`))
      }
    }

    const notification = (method: string, params: Json.JsonObject | undefined): Effect.Effect<void> => {
      if (method !== "notifications/cancelled") return Effect.void
      const cancelled = Either.getOrUndefined(Schema.decodeUnknownEither(CancelledParams)(params))
      const deferred = cancelled === undefined ? undefined : calls.get(cancelled.requestId)
      return deferred === undefined ? Effect.void : Deferred.succeed(deferred, undefined)
    }

    const handle = (message: Json.JsonObject): Effect.Effect<Json.JsonObject> =>
      Either.match(decodeMessage(message), {
        onLeft: () => Effect.succeed(failure(null, InvalidRequest, "Invalid JSON-RPC message")),
        onRight: (decoded) =>
          "id" in decoded
            ? request(decoded.id, decoded.method, decoded.params)
            : Effect.as(notification(decoded.method, decoded.params), acknowledged)
      })

    return { name: served.name, handle: (message) => Effect.withSpan(handle(message), "McpServer.handle", { attributes: { server: served.name } }) }
  })
