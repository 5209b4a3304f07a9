/**
 * Tools and toolkits alone: the JSON Schema a tool is listed with, decoding
 * of the CLI's arguments, results, timeouts (TestClock), and interruption,
 * through the MCP server's JSON-RPC and through `mcp_message` requests.
 */
import { describe, expect, it } from "@effect/vitest"
import { ProcessHost } from "@skein/kernel"
import type { Control, HostMessage, Json } from "@skein/protocol"
import { Context, Deferred, Effect, Fiber, JSONSchema, Layer, Option, Ref, Schema, TestClock } from "effect"
import * as StateCell from "../src/internal/stateCell.js"
import * as CliRequests from "../src/internal/cliRequests.js"
import * as ForkLaunch from "../src/internal/forkLaunch.js"
import * as McpServer from "../src/internal/mcpServer.js"
import * as Session from "../src/Session.js"
import * as SessionState from "../src/SessionState.js"
import * as Tool from "../src/Tool.js"
import * as Toolkit from "../src/Toolkit.js"

class Orders extends Context.Tag("test/Orders")<Orders, { readonly find: (id: number) => Effect.Effect<string> }>() {}

const LookupInput = Schema.Struct({ id: Schema.Number.annotations({ description: "The order's number" }) })

const lookupOrder = Tool.make({
  name: "lookup_order",
  description: "Finds an order",
  input: LookupInput,
  output: Schema.Struct({ id: Schema.Number, status: Schema.String }),
  run: ({ id }) => Effect.map(Effect.flatMap(Orders, (orders) => orders.find(id)), (status) => ({ id, status }))
})

const ordersLayer = Layer.succeed(Orders, { find: (id) => Effect.succeed(id === 7 ? "shipped" : "unknown") })

const serverOf = <R>(toolkit: Toolkit.Toolkit<R>) =>
  Effect.flatMap(Toolkit.bind(toolkit), (bound) => McpServer.make(bound.servers[0]!))

const rpc = (id: number, method: string, params?: Json.JsonObject): Json.JsonObject =>
  params === undefined ? { jsonrpc: "2.0", id, method } : { jsonrpc: "2.0", id, method, params }

const call = (id: number, name: string, args: Json.JsonObject) => rpc(id, "tools/call", { name, arguments: args })

describe("Tool", () => {
  it("is listed with the JSON Schema of its input (JSONSchema.make, without $schema)", () => {
    const { $schema: _, ...expected } = JSONSchema.make(LookupInput)
    expect(lookupOrder.definition).toEqual({ name: "lookup_order", description: "Finds an order", inputSchema: expected })
    expect(lookupOrder.definition.inputSchema).toMatchObject({
      type: "object",
      required: ["id"],
      properties: { id: { type: "number", description: "The order's number" } }
    })
  })

  it("is always listed with an object schema: an empty struct, a class; anything else is refused", () => {
    const empty = Tool.make({ name: "e", description: "", input: Schema.Struct({}), run: () => Effect.succeed("") })
    expect(empty.definition.inputSchema).toEqual({ type: "object", properties: {} })
    class Query extends Schema.Class<Query>("Query")({ q: Schema.String }) {}
    const byClass = Tool.make({ name: "c", description: "", input: Query, run: ({ q }) => Effect.succeed(q) })
    expect(byClass.definition.inputSchema).toMatchObject({ type: "object", required: ["q"], properties: { q: { type: "string" } } })
    expect(() => Tool.make({ name: "n", description: "", input: Schema.Number, run: () => Effect.succeed("") })).toThrow(/must be a struct schema/)
  })

  it.effect("runs with its requirements and answers with the output's JSON, pretty-printed", () =>
    Effect.gen(function*() {
      const result = yield* lookupOrder.call({ id: 7 }).pipe(Effect.provide(ordersLayer))
      expect(result.isError).toBe(false)
      expect(result.content).toEqual([{ type: "text", text: JSON.stringify({ id: 7, status: "shipped" }, null, 2) }])
    }))

  it.effect("bad arguments become an error result that names the field; the run never starts", () =>
    Effect.gen(function*() {
      const ran = yield* Ref.make(false)
      const tool = Tool.make({
        name: "t",
        description: "",
        input: Schema.Struct({ id: Schema.Number, tag: Schema.String }),
        run: () => Effect.as(Ref.set(ran, true), "ran")
      })
      const result = yield* tool.call({ id: "x" })
      expect(result.isError).toBe(true)
      const message = result.content[0]?.type === "text" ? result.content[0].text : ""
      expect(message).toContain("Invalid arguments for t")
      expect(message).toContain(`id: Expected number, actual "x"`)
      expect(message).toContain("tag: is missing")
      expect(yield* Ref.get(ran)).toBe(false)
    }))

  it.effect("text, JSON, images, explicit errors, ToolError and defects", () =>
    Effect.gen(function*() {
      const input = Schema.Struct({ kind: Schema.String })
      const tool = Tool.make({
        name: "many",
        description: "",
        input,
        run: ({ kind }): Effect.Effect<string | Tool.Result, Tool.ToolError> => {
          switch (kind) {
            case "text":
              return Effect.succeed("plain")
            case "json":
              return Effect.succeed(Tool.json({ a: [1] }))
            case "image":
              return Effect.succeed(Tool.image(new Uint8Array([1, 2, 3]), "image/png"))
            case "error":
              return Effect.succeed(Tool.error("told you"))
            case "fail":
              return Effect.fail(new Tool.ToolError({ message: "no such order" }))
            default:
              return Effect.die("boom")
          }
        }
      })
      const of = (kind: string) => tool.call({ kind })
      expect(yield* of("text")).toMatchObject({ content: [{ type: "text", text: "plain" }], isError: false })
      expect(yield* of("json")).toMatchObject({ content: [{ type: "text", text: "{\n  \"a\": [\n    1\n  ]\n}" }] })
      expect(yield* of("image")).toMatchObject({ content: [{ type: "image", data: "AQID", mimeType: "image/png" }] })
      expect(yield* of("error")).toMatchObject({ content: [{ text: "told you" }], isError: true })
      expect(yield* of("fail")).toMatchObject({ content: [{ text: "no such order" }], isError: true })
      const defect = yield* of("die")
      expect(defect.isError).toBe(true)
      expect(JSON.stringify(defect.content)).toContain("many failed unexpectedly")
      expect(Tool.toJson(yield* of("error"))).toEqual({ content: [{ type: "text", text: "told you" }], isError: true })
    }))

  it.effect("a run past its timeout is interrupted (its finalizer runs) and answers with an error", () =>
    Effect.gen(function*() {
      const finalized = yield* Ref.make(false)
      const tool = Tool.make({
        name: "slow",
        description: "",
        input: Schema.Struct({}),
        timeout: "5 seconds",
        run: () => Effect.never.pipe(Effect.ensuring(Ref.set(finalized, true)))
      })
      const fiber = yield* Effect.fork(tool.call({}))
      yield* TestClock.adjust("4 seconds")
      expect(fiber.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 second")
      const result = yield* Fiber.join(fiber)
      expect(result).toMatchObject({ isError: true, content: [{ text: "slow timed out after 5s" }] })
      expect(yield* Ref.get(finalized)).toBe(true)
    }))

  it.effect("the default timeout is two minutes", () =>
    Effect.gen(function*() {
      const tool = Tool.make({ name: "slow", description: "", input: Schema.Struct({}), run: () => Effect.never })
      const fiber = yield* Effect.fork(tool.call({}))
      yield* TestClock.adjust("119 seconds")
      expect(fiber.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 second")
      expect((yield* Fiber.join(fiber)).isError).toBe(true)
    }))
})

describe("Toolkit", () => {
  it("names tools as the CLI does, and refuses names MCP would not accept", () => {
    const kit = Toolkit.make("shop", [lookupOrder])
    expect(Toolkit.toolNames(kit)).toEqual(["mcp__shop__lookup_order"])
    expect(() => Toolkit.make("a shop", [lookupOrder])).toThrow(/not a valid MCP name/)
    const kitB = Toolkit.make("shop", [])
    expect(() => Toolkit.layer(kit, kitB)).toThrow(/two toolkits are named shop/)
  })

  it.effect("the server answers initialize, tools/list, tools/call, ping, notifications and unknown methods", () =>
    Effect.gen(function*() {
      const server = yield* serverOf(Toolkit.make("shop", [lookupOrder], { version: "2.0.0" })).pipe(Effect.provide(ordersLayer))
      expect(yield* server.handle(rpc(0, "initialize", { protocolVersion: "2025-06-18", capabilities: {} }))).toEqual({
        jsonrpc: "2.0",
        id: 0,
        result: { protocolVersion: "2025-06-18", capabilities: { tools: {} }, serverInfo: { name: "shop", version: "2.0.0" } }
      })
      expect(yield* server.handle(rpc(9, "initialize", { protocolVersion: "1999-01-01" }))).toMatchObject({
        result: { protocolVersion: McpServer.protocolVersions[0] }
      })
      expect(yield* server.handle({ jsonrpc: "2.0", method: "notifications/initialized" })).toEqual({ jsonrpc: "2.0", result: {}, id: 0 })
      expect(yield* server.handle(rpc(1, "tools/list"))).toEqual({ jsonrpc: "2.0", id: 1, result: { tools: [lookupOrder.definition] } })
      expect(yield* server.handle(call(2, "lookup_order", { id: 7 }))).toEqual({
        jsonrpc: "2.0",
        id: 2,
        result: { content: [{ type: "text", text: JSON.stringify({ id: 7, status: "shipped" }, null, 2) }] }
      })
      expect(yield* server.handle(call(3, "nope", {}))).toMatchObject({ id: 3, result: { isError: true } })
      expect(yield* server.handle(rpc(4, "ping"))).toEqual({ jsonrpc: "2.0", id: 4, result: {} })
      expect(yield* server.handle(rpc(5, "resources/list"))).toMatchObject({ id: 5, error: { code: -32601 } })
      expect(yield* server.handle({ nonsense: true })).toMatchObject({ id: null, error: { code: -32600 } })
    }))

  it.effect("notifications/cancelled stops the call it names; the run's finalizer runs", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const finalized = yield* Ref.make(false)
      const sleepy = Tool.make({
        name: "sleepy",
        description: "",
        input: Schema.Struct({}),
        run: () => Deferred.succeed(started, undefined).pipe(Effect.zipRight(Effect.never), Effect.ensuring(Ref.set(finalized, true)))
      })
      const server = yield* serverOf(Toolkit.make("k", [sleepy]))
      const fiber = yield* Effect.fork(server.handle(call(11, "sleepy", {})))
      yield* Deferred.await(started)
      yield* server.handle({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 11, reason: "user" } })
      expect(yield* Fiber.join(fiber)).toMatchObject({ id: 11, result: { isError: true, content: [{ text: "sleepy was cancelled" }] } })
      expect(yield* Ref.get(finalized)).toBe(true)
    }))
})

describe("mcp_message requests", () => {
  const setup = <R>(toolkit: Toolkit.Toolkit<R>) =>
    Effect.gen(function*() {
      const written = yield* Ref.make<ReadonlyArray<HostMessage.HostMessage>>([])
      const state = yield* StateCell.make(SessionState.initial({ cwd: "/tmp" }))
      const requests = yield* CliRequests.make({
        services: {
          permissions: Option.none(),
          hooks: Option.none(),
          elicitation: Option.none(),
          toolkits: Option.some(yield* Toolkit.bind(toolkit))
        },
        state,
        write: (message) => Ref.update(written, (all) => [...all, message])
      })
      const writtenN = (n: number) =>
        Ref.get(written).pipe(Effect.repeat({ until: (all) => all.length >= n }), Effect.zipLeft(Effect.yieldNow()))
      return { requests, written, writtenN }
    })

  const mcpMessage = (requestId: string, serverName: string, message: Json.JsonObject): Control.CliRequest => ({
    type: "control_request",
    request_id: requestId,
    request: { subtype: "mcp_message", server_name: serverName, message }
  })

  it.scoped("are answered with the JSON-RPC response under mcp_response; the toolkit's name is in sdkMcpServers", () =>
    Effect.gen(function*() {
      const { requests, writtenN } = yield* setup(Toolkit.make("shop", [lookupOrder])).pipe(Effect.provide(ordersLayer))
      expect(requests.sdkMcpServers).toEqual(["shop"])
      yield* requests.onRequest(mcpMessage("req_1", "shop", call(2, "lookup_order", { id: 7 })))
      yield* requests.onRequest(mcpMessage("req_2", "elsewhere", rpc(3, "tools/list")))
      const answers = yield* writtenN(2)
      expect(answers).toContainEqual({
        type: "control_response",
        response: {
          subtype: "success",
          request_id: "req_1",
          response: { mcp_response: { jsonrpc: "2.0", id: 2, result: { content: [{ type: "text", text: JSON.stringify({ id: 7, status: "shipped" }, null, 2) }] } } }
        }
      })
      expect(answers).toContainEqual({
        type: "control_response",
        response: { subtype: "error", request_id: "req_2", error: CliRequests.unsupported("mcp_message for server elsewhere") }
      })
    }))

  it.scoped("control_cancel_request interrupts a running tool: its finalizer runs and nothing is written", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const finalized = yield* Deferred.make<void>()
      const sleepy = Tool.make({
        name: "sleepy",
        description: "",
        input: Schema.Struct({}),
        run: () => Deferred.succeed(started, undefined).pipe(Effect.zipRight(Effect.never), Effect.ensuring(Deferred.succeed(finalized, undefined)))
      })
      const { requests, written } = yield* setup(Toolkit.make("k", [sleepy]))
      yield* requests.onRequest(mcpMessage("req_9", "k", call(1, "sleepy", {})))
      yield* Deferred.await(started)
      expect(yield* requests.inFlight).toBe(1)
      yield* requests.onCancel("req_9")
      yield* Deferred.await(finalized)
      expect(yield* requests.inFlight).toBe(0)
      expect(yield* Ref.get(written)).toEqual([])
    }))
})

describe("Session.initializeRequest", () => {
  it("carries hooks, the toolkits' names, the system prompt as a list, agents, and the output schema's JSON Schema", () => {
    const output = Schema.Struct({ total: Schema.Number })
    const { $schema: _, ...jsonSchema } = JSONSchema.make(output)
    expect(Session.initializeRequest(
      {
        systemPrompt: "Be brief.",
        agents: { auditor: { description: "Audits", prompt: "You audit.", tools: ["Read"] } },
        outputSchema: output
      },
      { hookConfig: undefined, sdkMcpServers: ["shop"] }
    )).toEqual({
      subtype: "initialize",
      sdkMcpServers: ["shop"],
      systemPrompt: ["Be brief."],
      agents: { auditor: { description: "Audits", prompt: "You audit.", tools: ["Read"] } },
      jsonSchema
    })
    expect(Session.initializeRequest({}, { hookConfig: undefined, sdkMcpServers: undefined })).toEqual({ subtype: "initialize" })
  })
})

describe("a worker's toolkits", () => {
  it.scoped("are the parent's unless the fork says toolkits: \"none\"", () =>
    Effect.gen(function*() {
      const host = yield* ProcessHost.ProcessHost
      const bound = yield* Toolkit.bind(Toolkit.make("shop", [lookupOrder])).pipe(Effect.provide(ordersLayer))
      const shared: ForkLaunch.SharedHandlers = {
        permissions: Option.none(),
        hooks: Option.none(),
        elicitation: Option.none(),
        toolkits: Option.some(bound)
      }
      for (const mode of ["isolated", "interactive"] as const) {
        const inherited = ForkLaunch.services({ label: "w", prompt: "p", mode }, host, shared)
        expect(Context.getOption(inherited, Toolkit.Toolkits)).toEqual(Option.some(bound))
      }
      const none = ForkLaunch.services({ label: "w", prompt: "p", toolkits: "none" }, host, shared)
      expect(Option.isNone(Context.getOption(none, Toolkit.Toolkits))).toBe(true)
    }).pipe(Effect.provide(ProcessHost.layerMemory())))
})
