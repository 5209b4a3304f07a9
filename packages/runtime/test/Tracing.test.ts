/**
 * Tracing: the span tree of one real-CLI turn (Claude Code against FakeModel)
 * with two tool calls, one allowed and one denied, recorded by an in-memory
 * exporter; nothing exported where the layer is not provided; and the OTLP
 * layer posting to a collector.
 */
import * as HttpServer from "@effect/platform/HttpServer"
import { NodeContext, NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { SpanKind } from "@opentelemetry/api"
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { ProcessHost } from "@skein/kernel"
import { Serve } from "@skein/serve"
import { Permissions, Session } from "@skein/session"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { ConfigProvider, Context, Deferred, Effect, Layer, Stream } from "effect"
import * as Http from "node:http"
import * as Path from "node:path"
import { Tracing } from "../src/index.js"

const dirs = ClaudeCli.offlineDirs("skein-tracing-")

const liveLayer = Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer)

/** One session, one turn: the model runs `touch allowed.txt`, then `touch denied.txt`, then answers. */
const oneTurn = Effect.gen(function*() {
  const model = yield* FakeModel.make({
    replies: [
      FakeModel.toolUse("Bash", { command: "touch allowed.txt" }),
      FakeModel.toolUse("Bash", { command: "touch denied.txt" }),
      FakeModel.text("One of two.")
    ]
  })
  const d = yield* dirs
  return yield* Effect.scoped(Effect.gen(function*() {
    const session = yield* Session.start({
      cwd: d.cwd,
      configDir: d.configDir,
      env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: d.configDir, tmpDir: d.tmpDir }),
      bare: true,
      stopTimeouts: { stdinGrace: "500 millis", termGrace: "500 millis" }
    })
    const summary = yield* Effect.flatMap(session.send("Make the files"), (turn) => turn.result)
    // An initialize that carries nothing is sent when its answer is first asked for.
    yield* session.initialize
    return { summary, sessionId: yield* session.sessionId }
  })).pipe(
    Effect.provide(Permissions.layer((request) =>
      Effect.succeed(
        JSON.stringify(request.input).includes("allowed.txt") ? Permissions.allow() : Permissions.deny("not this one")
      )
    ))
  )
})

/** A local OTLP/HTTP collector that keeps what it is sent. */
const collector = Effect.gen(function*() {
  const received: Array<{ readonly path: string | undefined; readonly body: string }> = []
  const server = yield* Effect.acquireRelease(
    Effect.async<Http.Server>((resume) => {
      const s = Http.createServer((req, res) => {
        let body = ""
        req.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")))
        req.on("end", () => {
          received.push({ path: req.url, body })
          res.writeHead(200, { "content-type": "application/json" }).end("{}")
        })
      })
      s.listen(0, "127.0.0.1", () => resume(Effect.succeed(s)))
    }),
    (s) => Effect.async<void>((resume) => void s.close(() => resume(Effect.void)))
  )
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  return { url: `http://127.0.0.1:${port}`, received }
})

const byName = (spans: ReadonlyArray<ReadableSpan>, name: string) => spans.filter((span) => span.name === name)
const only = (spans: ReadonlyArray<ReadableSpan>, name: string): ReadableSpan => {
  const found = byName(spans, name)
  expect(found.map((span) => span.name)).toEqual([name])
  return found[0]!
}
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId
const idOf = (span: ReadableSpan) => span.spanContext().spanId

describe("Tracing", () => {
  it.scopedLive("records session → turn → tool → permission request spans of a real CLI turn, with their attributes", () => {
    const exporter = new InMemorySpanExporter()
    return Effect.gen(function*() {
      const { sessionId, summary } = yield* oneTurn
      expect(summary.text).toBe("One of two.")
      // The exporter forgets everything at shutdown: read it while the layer is up.
      const spans = exporter.getFinishedSpans()

      const session = only(spans, "Session")
      expect(parentOf(session)).toBeUndefined()
      expect(session.attributes).toMatchObject({
        "skein.session.id": sessionId,
        "skein.cli.version": "2.1.332",
        "process.pid": expect.any(Number)
      })
      expect(session.attributes["skein.session.cwd"]).toEqual(expect.stringContaining("skein-tracing-"))
      // The session is its own trace, linked to the call that started it.
      const start = only(spans, "Session.start")
      expect(session.links.map((link) => link.context.spanId)).toEqual([idOf(start)])
      expect(session.resource.attributes["service.name"]).toBe("skein-test")

      const inSession = spans.filter((span) => span.spanContext().traceId === session.spanContext().traceId)
      expect(inSession.map((span) => span.name)).not.toContain("Session.start")

      const turn = only(spans, "Session.turn")
      expect(parentOf(turn)).toBe(idOf(session))
      expect(turn.attributes).toMatchObject({
        "skein.turn.index": 1,
        "skein.turn.origin": "host",
        "skein.turn.results": 1,
        "skein.turn.interrupted": false,
        "skein.turn.is_error": false,
        "skein.turn.cost_usd": summary.costUsd,
        "gen_ai.usage.input_tokens": summary.usage.inputTokens,
        "gen_ai.usage.output_tokens": summary.usage.outputTokens
      })
      expect(summary.usage.outputTokens).toBeGreaterThan(0)
      // Linked to the `send` that asked for it.
      const send = only(spans, "Session.send")
      expect(turn.links.map((link) => link.context.spanId)).toEqual([idOf(send)])

      const tools = byName(spans, "Session.tool")
      expect(tools.map((tool) => [parentOf(tool), tool.attributes])).toEqual([
        [idOf(turn), {
          "gen_ai.tool.call.id": "toolu_fake_0001_0",
          "gen_ai.tool.name": "Bash",
          "skein.tool.permission": "allow",
          "skein.tool.is_error": false
        }],
        [idOf(turn), {
          "gen_ai.tool.call.id": "toolu_fake_0002_0",
          "gen_ai.tool.name": "Bash",
          "skein.tool.permission": "deny",
          "skein.tool.is_error": true
        }]
      ])
      for (const tool of tools) expect(tool.endTime[0] + tool.endTime[1] / 1e9).toBeGreaterThan(tool.startTime[0] + tool.startTime[1] / 1e9)

      const asks = byName(spans, "Session.cliRequest can_use_tool")
      expect(asks.map((ask) => [parentOf(ask), ask.attributes["skein.tool.permission"], ask.attributes["skein.control.direction"]]))
        .toEqual([[idOf(tools[0]!), "allow", "cli_to_host"], [idOf(tools[1]!), "deny", "cli_to_host"]])
      expect(asks[0]!.attributes).toMatchObject({ "skein.control.subtype": "can_use_tool", "gen_ai.tool.name": "Bash" })

      const initialize = only(spans, "Session.request initialize")
      expect(parentOf(initialize)).toBe(idOf(session))
      expect(initialize.attributes).toMatchObject({ "skein.control.subtype": "initialize", "skein.control.direction": "host_to_cli" })
      // Sent when `session.initialize` asked for it, after the turn: no link to the start.
      expect(initialize.links).toEqual([])

      // Every span of the session ended inside it.
      for (const span of inSession) expect(span.ended).toBe(true)
    }).pipe(
      Effect.provide(Layer.mergeAll(liveLayer, Tracing.layer({ spanProcessors: new SimpleSpanProcessor(exporter), serviceName: "skein-test" })))
    )
  })

  it.scopedLive("an interrupted turn: its span says so, the interrupt request is under it; no span per stream line", () => {
    const exporter = new InMemorySpanExporter()
    return Effect.gen(function*() {
      const long = Array.from({ length: 60 }, (_, i) => `word${i}`).join(" ")
      const model = yield* FakeModel.make({
        replies: [FakeModel.withDelay(FakeModel.text(long), "100 millis"), FakeModel.text("Back again.")]
      })
      const d = yield* dirs
      yield* Effect.scoped(Effect.gen(function*() {
        const session = yield* Session.start({
          cwd: d.cwd,
          configDir: d.configDir,
          env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: d.configDir, tmpDir: d.tmpDir }),
          bare: true,
          includePartialMessages: true,
          stopTimeouts: { stdinGrace: "500 millis", termGrace: "500 millis" }
        })
        const turn = yield* session.send("Talk for a while")
        const interruptOnce = yield* Effect.once(session.interrupt)
        yield* turn.events.pipe(
          Stream.tap((event) => event._tag === "Message" && event.message.type === "stream_event" ? interruptOnce : Effect.void),
          Stream.runDrain,
          Effect.fork
        )
        expect((yield* turn.result).interrupted).toBe(true)
        expect((yield* Effect.flatMap(session.send("Are you there?"), (t) => t.result)).text).toBe("Back again.")
      }))
      const spans = exporter.getFinishedSpans()
      const session = only(spans, "Session")
      const inSession = spans.filter((span) => span.spanContext().traceId === session.spanContext().traceId)
      // Dozens of stream_event lines, and still only these (nobody asked for the initialize answer, so none was sent).
      expect(inSession.map((span) => span.name).sort()).toEqual([
        "Session",
        "Session.request interrupt",
        "Session.turn",
        "Session.turn"
      ])
      const [first, second] = byName(spans, "Session.turn")
      expect([first!.attributes["skein.turn.index"], first!.attributes["skein.turn.interrupted"]]).toEqual([1, true])
      expect([second!.attributes["skein.turn.index"], second!.attributes["skein.turn.interrupted"]]).toEqual([2, false])
      const interrupt = only(spans, "Session.request interrupt")
      expect(parentOf(interrupt)).toBe(idOf(first!))
      expect(interrupt.links.map((link) => link.context.spanId)).toEqual([idOf(only(spans, "Session.interrupt"))])
    }).pipe(
      Effect.provide(Layer.mergeAll(liveLayer, Tracing.layer({ spanProcessors: new SimpleSpanProcessor(exporter) })))
    )
  })

  it.scopedLive("without the layer a session runs as usual and exports nothing, even with a tracer built elsewhere", () => {
    const exporter = new InMemorySpanExporter()
    return Effect.gen(function*() {
      // Up, in a fiber of its own, and working there (its probe is exported), but not provided to the
      // session: no span of the session may reach it through any global.
      const ready = yield* Deferred.make<void>()
      yield* Effect.void.pipe(
        Effect.withSpan("probe"),
        Effect.zipRight(Deferred.succeed(ready, undefined)),
        Effect.zipRight(Effect.never),
        Effect.provide(Tracing.layer({ spanProcessors: new SimpleSpanProcessor(exporter) })),
        Effect.forkScoped
      )
      yield* Deferred.await(ready)
      const { summary } = yield* oneTurn
      expect(summary.text).toBe("One of two.")
      expect(exporter.getFinishedSpans().map((span) => span.name)).toEqual(["probe"])
    }).pipe(Effect.provide(liveLayer))
  })

  it.scopedLive("layerOtlp posts the spans to an OTLP/HTTP collector at /v1/traces when its scope closes", () =>
    Effect.gen(function*() {
      const otlp = yield* collector
      yield* Effect.void.pipe(
        Effect.withSpan("Session.turn", { attributes: { "skein.turn.index": 1 } }),
        Effect.provide(Tracing.layerOtlp({ url: otlp.url, serviceName: "skein-otlp-test" }))
      )
      expect(otlp.received.map((r) => r.path)).toEqual(["/v1/traces"])
      expect(otlp.received[0]!.body).toContain("skein-otlp-test")
      expect(otlp.received[0]!.body).toContain("Session.turn")
    }))

  it.scopedLive("layerConfig: the collector and service name from OTEL_* variables; off when none is set", () =>
    Effect.gen(function*() {
      const otlp = yield* collector
      const traced = Effect.void.pipe(Effect.withSpan("Session.turn"), Effect.provide(Tracing.layerConfig))
      yield* traced.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map())))
      expect(otlp.received).toEqual([])
      yield* traced.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(
        new Map([["OTEL_EXPORTER_OTLP_ENDPOINT", `${otlp.url}/`], ["OTEL_SERVICE_NAME", "from-env"]])
      )))
      expect(otlp.received.map((r) => r.path)).toEqual(["/v1/traces"])
      expect(otlp.received[0]!.body).toContain("from-env")
    }))

  it.scopedLive("skein serve: one server span per HTTP request, with its route and status, the token redacted (and ?token= requests untraced)", () => {
    const exporter = new InMemorySpanExporter()
    const token = "tracing-token-0123456789"
    return Effect.gen(function*() {
      const d = yield* dirs
      const server = yield* Layer.build(
        Serve.layer({ token, roots: [d.cwd], configDir: d.configDir, stateDir: Path.join(d.root, "serve-state") }).pipe(
          Layer.provideMerge(NodeHttpServer.layer(() => Http.createServer(), { port: 0, host: "127.0.0.1" })),
          Layer.provideMerge(liveLayer),
          Layer.provide(Tracing.layer({ spanProcessors: new SimpleSpanProcessor(exporter) }))
        )
      ).pipe(Effect.map(Context.get(HttpServer.HttpServer)))
      const port = server.address._tag === "TcpAddress" ? server.address.port : 0
      const response = yield* Effect.promise(() => fetch(`http://127.0.0.1:${port}/session`, { headers: { authorization: `Bearer ${token}` } }))
      expect(response.status).toBe(200)
      // The dashboard's entry carries the token in its query: it makes no span at all.
      const entry = yield* Effect.promise(() => fetch(`http://127.0.0.1:${port}/?token=${token}`, { redirect: "manual" }))
      expect(entry.status).toBeLessThan(500)
      const requests = exporter.getFinishedSpans().filter((span) => span.kind === SpanKind.SERVER)
      expect(requests.map((span) => [span.name, span.attributes["http.route"], span.attributes["http.response.status_code"]]))
        .toEqual([["http.server GET", "/session", 200]])
      expect(requests[0]!.attributes["http.request.header.authorization"]).toBe("<redacted>")
      expect(JSON.stringify(exporter.getFinishedSpans().map((span) => span.attributes))).not.toContain(token)
    })
  })

  it("tracesEndpoint appends /v1/traces to a bare origin only", () => {
    expect(Tracing.tracesEndpoint("http://localhost:4318")).toBe("http://localhost:4318/v1/traces")
    expect(Tracing.tracesEndpoint("http://localhost:4318/")).toBe("http://localhost:4318/v1/traces")
    expect(Tracing.tracesEndpoint("https://otel.example/custom/traces")).toBe("https://otel.example/custom/traces")
  })
})
