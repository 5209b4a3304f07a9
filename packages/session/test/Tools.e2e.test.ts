/**
 * End-to-end: host-defined tools and the rest of `initialize` with the real
 * Claude Code CLI against FakeModel. What the model received (FakeModel's
 * request log) is the evidence for every case.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { TaskManager } from "@skein/kernel"
import { SessionIndex, TranscriptLayout, TranscriptStore } from "@skein/store"
import { FakeModel } from "@skein/testkit"
import { Context, Deferred, Effect, Either, Layer, Option, Ref, Schema } from "effect"
import * as Path from "node:path"
import * as Permissions from "../src/Permissions.js"
import * as Session from "../src/Session.js"
import * as SupervisedSession from "../src/SupervisedSession.js"
import * as Tool from "../src/Tool.js"
import * as Toolkit from "../src/Toolkit.js"
import * as Turn from "../src/Turn.js"
import * as Worker from "../src/Worker.js"
import * as Live from "./live.js"

class Orders extends Context.Tag("test/Orders")<Orders, {
  readonly find: (id: number) => Effect.Effect<string>
  readonly looked: Ref.Ref<ReadonlyArray<number>>
}>() {}

const ordersLayer = Layer.effect(
  Orders,
  Effect.map(Ref.make<ReadonlyArray<number>>([]), (looked) => ({
    looked,
    find: (id: number) => Effect.as(Ref.update(looked, (all) => [...all, id]), id === 42 ? "shipped on 2 May" : "not found")
  }))
)

const lookupOrder = Tool.make({
  name: "lookup_order",
  description: "Looks up an order by its number",
  input: Schema.Struct({ id: Schema.Number }),
  run: ({ id }) => Effect.flatMap(Orders, (orders) => orders.find(id)).pipe(Effect.map((status) => `order ${id}: ${status}`))
})

const shop = Toolkit.make("shop", [lookupOrder])

/** The tool_result blocks of the n-th conversation request the model received. */
const toolResultOf = (model: FakeModel.FakeModel["Type"], n: number) =>
  Effect.map(model.awaitRequest(n, FakeModel.isConversation), (request) => {
    const messages = Option.getOrThrow(request.messagesRequest).messages
    const last = messages.at(-1)
    const blocks = last === undefined || typeof last.content === "string" ? [] : last.content
    return JSON.stringify(blocks.filter((b) => b.type === "tool_result"))
  })

const systemOf = (request: FakeModel.RecordedRequest): string => JSON.stringify(Option.getOrThrow(request.messagesRequest).system ?? "")

describe("host tools with the real CLI", () => {
  it.scopedLive("FakeModel calls lookup_order: the tool reads a service from its layer, the model gets the result, the turn ends", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.toolUse("mcp__shop__lookup_order", { id: 42 }), FakeModel.text("It shipped.")]
      })
      const d = yield* Live.dirs
      const session = yield* Session.start(Live.liveOptions(model, d, { allowedTools: Toolkit.toolNames(shop) }))
      const summary = yield* Effect.flatMap(session.send("Where is order 42?"), (t) => t.result)
      expect(summary.text).toBe("It shipped.")
      expect(yield* toolResultOf(model, 1)).toContain("order 42: shipped on 2 May")
      expect(yield* Effect.flatMap(Orders, (o) => Ref.get(o.looked))).toEqual([42])
      const status = yield* session.mcpStatus
      expect(JSON.stringify(status)).toContain("\"shop\"")
    }).pipe(Effect.provide(Layer.provideMerge(Toolkit.layer(shop), ordersLayer)), Effect.provide(Live.layer)))

  it.scopedLive("bad arguments (id: \"x\"): the model receives a tool error naming id, and the tool never runs", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.toolUse("mcp__shop__lookup_order", { id: "x" }), FakeModel.text("Bad id.")]
      })
      const d = yield* Live.dirs
      const session = yield* Session.start(Live.liveOptions(model, d, { allowedTools: Toolkit.toolNames(shop) }))
      const summary = yield* Effect.flatMap(session.send("Where is order x?"), (t) => t.result)
      expect(summary.text).toBe("Bad id.")
      const result = yield* toolResultOf(model, 1)
      expect(result).toContain("\"is_error\":true")
      expect(result).toContain("id: Expected number, actual")
      expect(yield* Effect.flatMap(Orders, (o) => Ref.get(o.looked))).toEqual([])
    }).pipe(Effect.provide(Layer.provideMerge(Toolkit.layer(shop), ordersLayer)), Effect.provide(Live.layer)))

  it.scopedLive("the permission policy sees host tools by their mcp__<server>__<tool> names; a denial keeps the tool from running", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.toolUse("mcp__shop__lookup_order", { id: 42 }), FakeModel.text("Not allowed.")]
      })
      const d = yield* Live.dirs
      const asked = yield* Ref.make<ReadonlyArray<string>>([])
      const session = yield* Session.start(Live.liveOptions(model, d)).pipe(
        Effect.provide(Permissions.layer((request) => Effect.as(Ref.update(asked, (all) => [...all, request.toolName]), Permissions.deny("no orders today"))))
      )
      const summary = yield* Effect.flatMap(session.send("Where is order 42?"), (t) => t.result)
      expect(summary.text).toBe("Not allowed.")
      expect(yield* Ref.get(asked)).toEqual(["mcp__shop__lookup_order"])
      expect(yield* toolResultOf(model, 1)).toContain("no orders today")
      expect(yield* Effect.flatMap(Orders, (o) => Ref.get(o.looked))).toEqual([])
    }).pipe(Effect.provide(Layer.provideMerge(Toolkit.layer(shop), ordersLayer)), Effect.provide(Live.layer)))

  it.scopedLive("a tool that sleeps is interrupted by interrupt: its finalizer runs, and the next turn works", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const finalized = yield* Deferred.make<void>()
      const nap = Tool.make({
        name: "nap",
        description: "Sleeps",
        input: Schema.Struct({}),
        run: () => Deferred.succeed(started, undefined).pipe(Effect.zipRight(Effect.never), Effect.ensuring(Deferred.succeed(finalized, undefined)))
      })
      const kit = Toolkit.make("rest", [nap])
      const model = yield* FakeModel.make({ replies: [FakeModel.toolUse("mcp__rest__nap", {}), FakeModel.text("Awake again.")] })
      const d = yield* Live.dirs
      const session = yield* Session.start(Live.liveOptions(model, d, { allowedTools: Toolkit.toolNames(kit) })).pipe(
        Effect.provide(Toolkit.layer(kit))
      )
      const turn = yield* session.send("Take a nap")
      yield* Deferred.await(started)
      yield* session.interrupt
      yield* Deferred.await(finalized).pipe(Effect.timeout("10 seconds"))
      const summary = yield* turn.result
      expect(summary.interrupted).toBe(true)
      const next = yield* Effect.flatMap(session.send("Are you up?"), (t) => t.result)
      expect(next.interrupted).toBe(false)
      expect(next.text).toBe("Awake again.")
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("a tool over its timeout answers with an error result, and the turn goes on", () =>
    Effect.gen(function*() {
      const stuck = Tool.make({ name: "stuck", description: "Never returns", input: Schema.Struct({}), timeout: "300 millis", run: () => Effect.never })
      const kit = Toolkit.make("slow", [stuck])
      const model = yield* FakeModel.make({ replies: [FakeModel.toolUse("mcp__slow__stuck", {}), FakeModel.text("Gave up.")] })
      const d = yield* Live.dirs
      const session = yield* Session.start(Live.liveOptions(model, d, { allowedTools: Toolkit.toolNames(kit) })).pipe(
        Effect.provide(Toolkit.layer(kit))
      )
      const summary = yield* Effect.flatMap(session.send("Try it"), (t) => t.result).pipe(Effect.timeout("20 seconds"))
      expect(summary.text).toBe("Gave up.")
      const result = yield* toolResultOf(model, 1)
      expect(result).toContain("stuck timed out after 300ms")
      expect(result).toContain("\"is_error\":true")
    }).pipe(Effect.provide(Live.layer)))
})

describe("the rest of initialize with the real CLI", () => {
  const Answer = Schema.Struct({
    total: Schema.Number.pipe(Schema.filter((n) => n % 2 === 0, { message: () => "total must be even" })),
    currency: Schema.String
  })

  it.scopedLive("outputSchema: the summary holds the decoded object", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.toolUse("StructuredOutput", { total: 12, currency: "EUR" }), FakeModel.text("Done.")]
      })
      const d = yield* Live.dirs
      const session = yield* Session.start(Live.liveOptions(model, d, { outputSchema: Answer }))
      const summary = yield* Effect.flatMap(session.send("Sum it up"), (t) => t.result)
      expect(summary.structuredOutput).toEqual(Either.right({ total: 12, currency: "EUR" }))
      expect(yield* Turn.structuredOutput(Answer)(summary)).toEqual({ total: 12, currency: "EUR" })
      // The model was given the schema as the StructuredOutput tool's input.
      const first = yield* model.awaitRequest(0, FakeModel.isConversation)
      const tool = Option.getOrThrow(first.messagesRequest).tools?.find((t) => t.name === "StructuredOutput")
      expect(JSON.stringify(tool)).toContain("currency")
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("outputSchema: a reply that does not match is StructuredOutputInvalid, with the schema's message", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.toolUse("StructuredOutput", { total: 13, currency: "EUR" }), FakeModel.text("Done.")]
      })
      const d = yield* Live.dirs
      const session = yield* Session.start(Live.liveOptions(model, d, { outputSchema: Answer }))
      const summary = yield* Effect.flatMap(session.send("Sum it up"), (t) => t.result)
      const error = yield* Effect.flip(Turn.structuredOutput(Answer)(summary))
      expect(error._tag).toBe("StructuredOutputInvalid")
      expect(error.issue).toContain("total must be even")
      expect(error.output).toEqual({ total: 13, currency: "EUR" })
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("agents are listed in the CLI's init; appendSystemPrompt and systemPrompt reach the model", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.text("Hello.")] })
      const d = yield* Live.dirs
      const session = yield* Session.start(Live.liveOptions(model, d, {
        agents: { "order-auditor": { description: "Audits orders", prompt: "You audit orders.", tools: ["Read"] } },
        appendSystemPrompt: "Always answer in haiku (skein-append-marker).",
        systemPrompt: "You are the skein-replaced-marker assistant."
      }))
      const events = yield* session.subscribe
      yield* Effect.flatMap(session.send("Hi"), (t) => t.result)
      const all = yield* events.takeAll
      const init = Array.from(all).find((e) => e._tag === "Message" && e.message.type === "system" && e.message.subtype === "init")
      expect(JSON.stringify(init)).toContain("order-auditor")
      const request = yield* model.awaitRequest(0, FakeModel.isConversation)
      // The CLI's own long prompt is gone: only its identity line is left before the replacement and the addition.
      const system = Option.getOrThrow(request.messagesRequest).system
      const texts = Array.isArray(system) ? system.map((block) => block.text) : [String(system)]
      expect(texts.at(-1)).toBe("You are the skein-replaced-marker assistant.\n\nAlways answer in haiku (skein-append-marker).")
      expect(texts.join("").length).toBeLessThan(1000)
    }).pipe(Effect.provide(Live.layer)))
})

describe("toolkits and options across restarts and forks, with the real CLI", () => {
  it.scopedLive("a SupervisedSession restart keeps the toolkit and the initialize options", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.toolUse("mcp__shop__lookup_order", { id: 42 }),
          FakeModel.text("Shipped."),
          FakeModel.toolUse("mcp__shop__lookup_order", { id: 42 }),
          FakeModel.text("Still shipped.")
        ]
      })
      const d = yield* Live.dirs
      const supervised = yield* SupervisedSession.start({
        ...Live.liveOptions(model, d, {
          allowedTools: Toolkit.toolNames(shop),
          agents: { "order-auditor": { description: "Audits orders", prompt: "You audit orders." } },
          appendSystemPrompt: "skein-append-marker"
        }),
        restart: { base: "50 millis" }
      })
      expect((yield* Effect.flatMap(supervised.send("Order 42?"), (t) => t.result)).text).toBe("Shipped.")
      const before = yield* supervised.current
      yield* before.end
      yield* before.exit
      const events = yield* Effect.flatMap(Effect.retry(supervised.current.pipe(Effect.filterOrFail((s) => s.pid !== before.pid)), { times: 200 }), (s) => s.subscribe)
      const after = yield* Effect.flatMap(supervised.send("Order 42 again?"), (t) => t.result)
      expect(after.text).toBe("Still shipped.")
      expect(yield* toolResultOf(model, 3)).toContain("order 42: shipped on 2 May")
      expect(yield* Effect.flatMap(Orders, (o) => Ref.get(o.looked))).toEqual([42, 42])
      const init = Array.from(yield* events.takeAll).find((e) => e._tag === "Message" && e.message.type === "system" && e.message.subtype === "init")
      expect(JSON.stringify(init)).toContain("order-auditor")
      expect(systemOf(yield* model.awaitRequest(3, FakeModel.isConversation))).toContain("skein-append-marker")
    }).pipe(Effect.provide(Layer.provideMerge(Toolkit.layer(shop), ordersLayer)), Effect.provide(Live.layer)))

  it.scopedLive("a Worker fork serves the parent's toolkits; with toolkits: \"none\" it has none", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.text("Noted."),
          FakeModel.toolUse("mcp__shop__lookup_order", { id: 42 }),
          FakeModel.text("Worker: shipped."),
          FakeModel.toolUse("mcp__shop__lookup_order", { id: 42 }),
          FakeModel.text("Worker: no tool.")
        ]
      })
      const d = yield* Live.dirs
      const tasks = yield* TaskManager.make({ root: Path.join(d.root, "tasks") })
      const stores = yield* Layer.build(Layer.mergeAll(TranscriptStore.layer, SessionIndex.layer).pipe(
        Layer.provide(TranscriptLayout.layer(d.configDir)),
        Layer.provide(NodeContext.layer)
      ))
      const launch = Live.liveOptions(model, d, { allowedTools: Toolkit.toolNames(shop) })
      const parent = yield* Session.start(launch)
      yield* Effect.flatMap(parent.send("Remember order 42"), (t) => t.result)
      const workers = yield* Worker.pool(parent, { launch }).pipe(Effect.provide(stores), Effect.provideService(TaskManager.TaskManager, tasks))
      const inherited = yield* Effect.flatMap(Worker.fork(workers, { label: "with-tools", prompt: "Look it up" }), (w) => w.result)
      expect(inherited.text).toBe("Worker: shipped.")
      expect(yield* toolResultOf(model, 2)).toContain("order 42: shipped on 2 May")
      const without = yield* Effect.flatMap(Worker.fork(workers, { label: "without", prompt: "Look it up", toolkits: "none" }), (w) => w.result)
      expect(without.text).toBe("Worker: no tool.")
      expect(yield* toolResultOf(model, 4)).toContain("No such tool available: mcp__shop__lookup_order")
      expect(yield* Effect.flatMap(Orders, (o) => Ref.get(o.looked))).toEqual([42])
    }).pipe(Effect.provide(Layer.provideMerge(Toolkit.layer(shop), ordersLayer)), Effect.provide(Live.layer)))
})
