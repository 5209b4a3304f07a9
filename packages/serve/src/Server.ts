/**
 * The opencode-compatible HTTP + SSE server over a `SessionRegistry`.
 *
 * Security is on by default: it binds 127.0.0.1, every request needs the
 * token (bearer, or basic auth with the token as the password, as
 * opencode's clients send it), a browser `Origin` must be configured, and
 * `directory` stays inside the roots. Bodies are decoded by schemas; bad
 * input gets a 400 with the schema's message.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerError from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import type { Anthropic } from "@skein/protocol"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as Discovery from "./internal/discovery.js"
import * as Dashboard from "./Dashboard.js"
import { authorizedRequest, directoryOf, error, sameOrigin, sseHeaders } from "./internal/http.js"
import * as Sse from "./internal/sse.js"
import { PermissionBroker } from "./PermissionBroker.js"
import type { RegistryError } from "./ServeError.js"
import { PermissionNotFound } from "./ServeError.js"
import { ServerEvents } from "./ServerEvents.js"
import { SessionRegistry } from "./SessionRegistry.js"

export interface Options {
  /** The bearer token (and basic-auth password) every request must carry. */
  readonly token: string
  /** Folders sessions may run in (physical paths); the first is the default `directory`. */
  readonly roots: ReadonlyArray<string>
  /** Browser origins allowed to call (CORS); a request from any other `Origin` gets 403. */
  readonly origins?: ReadonlyArray<string> | undefined
  /** Where `/path` says state and config live. */
  readonly stateDir: string
  readonly configDir: string
  /** Default 10 s. */
  readonly heartbeat?: Duration.DurationInput | undefined
  /** A client more than this many events behind the log is sent `server.resync` and disconnected. Default 50,000. */
  readonly maxLag?: number | undefined
}

const TextPart = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String, synthetic: Schema.optional(Schema.Boolean) })
const OtherPart = Schema.Struct({ type: Schema.String })
const PromptBody = Schema.Struct({
  messageID: Schema.optional(Schema.String),
  model: Schema.optional(Schema.Struct({ providerID: Schema.String, modelID: Schema.String })),
  agent: Schema.optional(Schema.String),
  noReply: Schema.optional(Schema.Boolean),
  system: Schema.optional(Schema.String),
  parts: Schema.Array(Schema.Union(TextPart, OtherPart))
})
const CreateBody = Schema.Struct({ title: Schema.optional(Schema.String), parentID: Schema.optional(Schema.String) })
const ReplyBody = Schema.Struct({ reply: Schema.Literal("once", "always", "reject"), message: Schema.optional(Schema.String) })
const LegacyReplyBody = Schema.Struct({ response: Schema.Literal("once", "always", "reject") })
const SessionParams = Schema.Struct({ id: Schema.String })
const PermissionParams = Schema.Struct({ id: Schema.String, permissionID: Schema.String })

class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", { message: Schema.String }) {}

const body = <A, I>(schema: Schema.Schema<A, I>) =>
  HttpServerRequest.schemaBodyJson(schema).pipe(
    Effect.mapError((e) =>
      new BadRequest({ message: ParseResult.isParseError(e) ? ParseResult.TreeFormatter.formatErrorSync(e) : "the body is not JSON" })
    )
  )

const params = <A, I extends Readonly<Record<string, string | undefined>>>(schema: Schema.Schema<A, I>) =>
  HttpRouter.schemaPathParams(schema).pipe(Effect.mapError(() => new BadRequest({ message: "bad path parameters" })))

const contentOf = (parts: ReadonlyArray<typeof PromptBody.Type["parts"][number]>): ReadonlyArray<Anthropic.ContentBlock> =>
  parts.flatMap((p) => ("text" in p && p.type === "text" ? [{ type: "text" as const, text: p.text }] : []))

const json = (value: unknown, status = 200) => HttpServerResponse.unsafeJson(value, { status })

/** Every failure as opencode's `{name, data: {message}}` with its status. */
const respondError = (e: RegistryError | BadRequest | PermissionNotFound) => {
  switch (e._tag) {
    case "SessionNotFound":
      return Effect.succeed(error(404, "NotFoundError", e.message))
    case "PermissionNotFound":
      return Effect.succeed(error(404, "NotFoundError", e.message))
    case "DirectoryRejected":
      return Effect.succeed(error(403, "DirectoryRejected", e.message))
    case "BadRequest":
      return Effect.succeed(error(400, "BadRequest", e.message))
    case "SessionFailed":
      return Effect.succeed(error(500, "UnknownError", e.message))
  }
}

export const router = (options: Options) =>
  Effect.gen(function*() {
    const registry = yield* SessionRegistry
    const broker = yield* PermissionBroker
    const events = yield* ServerEvents
    const fs = yield* FileSystem.FileSystem
    const directory = Effect.flatMap(HttpServerRequest.HttpServerRequest, (r) => directoryOf(r, options.roots)).pipe(
      Effect.provideService(FileSystem.FileSystem, fs)
    )
    const sessionId = Effect.map(params(SessionParams), (p) => p.id)

    const events$ = (global: boolean) =>
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const dir = global ? undefined : yield* directory
        const url = new URL(request.url, "http://localhost")
        const last = request.headers["last-event-id"] ?? url.searchParams.get("lastEventId") ?? undefined
        const lastEventId = last === undefined || !/^\d+$/.test(last) ? undefined : Number(last)
        const stream = yield* Sse.stream({
          events,
          broker,
          directory: dir,
          lastEventId,
          // `?eventVersion=2`: the header, for EventSource, which cannot set one.
          canonicalOnly: (request.headers["accept-event-version"] ?? url.searchParams.get("eventVersion")) === "2",
          heartbeat: options.heartbeat ?? Duration.seconds(10),
          maxLag: options.maxLag ?? 50_000
        })
        return HttpServerResponse.stream(stream, { contentType: "text/event-stream", headers: sseHeaders })
      })

    const prompt = Effect.gen(function*() {
      const id = yield* sessionId
      const input = yield* body(PromptBody)
      return json(yield* registry.prompt(id, contentOf(input.parts), { messageID: input.messageID }))
    })
    const promptAsync = Effect.gen(function*() {
      const id = yield* sessionId
      const input = yield* body(PromptBody)
      const messageID = yield* registry.promptAsync(id, contentOf(input.parts), { messageID: input.messageID })
      return HttpServerResponse.empty({ status: 204, headers: { "x-skein-message-id": messageID } })
    })
    const reply = (id: string, resolution: { readonly reply: "once" | "always" | "reject"; readonly message?: string | undefined }) =>
      Effect.as(broker.reply(id, resolution), json(true))

    const staticJson = (value: (dir: string) => unknown) => Effect.map(directory, (dir) => json(value(dir)))

    return HttpRouter.empty.pipe(
      HttpRouter.get("/global/health", Effect.succeed(json({ healthy: true, version: "skein" }))),
      HttpRouter.get("/event", events$(false)),
      HttpRouter.get("/global/event", events$(true)),
      // Discovery, at the clients' startup
      HttpRouter.get("/config", staticJson(Discovery.config)),
      HttpRouter.get("/config/providers", staticJson(() => ({ providers: [Discovery.provider], default: Discovery.defaults }))),
      HttpRouter.get("/provider", staticJson(() => ({ all: [Discovery.provider], default: Discovery.defaults, connected: ["anthropic"] }))),
      HttpRouter.get("/provider/auth", staticJson(() => ({}))),
      HttpRouter.get("/agent", staticJson(() => Discovery.agents)),
      HttpRouter.get("/command", staticJson(() => [])),
      HttpRouter.get("/path", staticJson((dir) => Discovery.path(dir, options.stateDir, options.configDir))),
      HttpRouter.get("/vcs", staticJson(() => ({}))),
      HttpRouter.get("/lsp", staticJson(() => [])),
      HttpRouter.get("/mcp", staticJson(() => ({}))),
      HttpRouter.get("/formatter", staticJson(() => [])),
      HttpRouter.get("/project/current", staticJson((dir) => Discovery.project("global", dir))),
      HttpRouter.get("/experimental/capabilities", staticJson(() => ({ backgroundSubagents: false }))),
      HttpRouter.get("/experimental/console", staticJson(() => ({ consoleManagedProviders: [], switchableOrgCount: 0 }))),
      HttpRouter.get("/experimental/workspace", staticJson(() => [])),
      HttpRouter.get("/experimental/workspace/status", staticJson(() => ({}))),
      HttpRouter.get("/experimental/resource", staticJson(() => ({})))
    ).pipe(
      // Sessions
      HttpRouter.get("/session", Effect.flatMap(directory, (dir) => Effect.map(registry.list(dir), json))),
      HttpRouter.post(
        "/session",
        Effect.gen(function*() {
          const dir = yield* directory
          const input = yield* body(CreateBody).pipe(Effect.orElseSucceed(() => ({ title: undefined })))
          return json(yield* registry.create({ directory: dir, title: input.title }))
        })
      ),
      HttpRouter.get("/session/status", Effect.map(registry.status, json)),
      HttpRouter.get("/session/:id", Effect.flatMap(sessionId, (id) => Effect.map(registry.get(id), json))),
      HttpRouter.get("/session/:id/message", Effect.flatMap(sessionId, (id) => Effect.map(registry.messages(id), json))),
      HttpRouter.get("/session/:id/todo", Effect.as(Effect.flatMap(sessionId, registry.get), json([]))),
      HttpRouter.get("/session/:id/diff", Effect.as(Effect.flatMap(sessionId, registry.get), json([]))),
      HttpRouter.get("/session/:id/children", Effect.as(Effect.flatMap(sessionId, registry.get), json([]))),
      HttpRouter.post("/session/:id/message", prompt),
      HttpRouter.post("/session/:id/prompt_async", promptAsync),
      HttpRouter.post("/session/:id/abort", Effect.flatMap(sessionId, (id) => Effect.map(registry.abort(id), json)))
    ).pipe(
      // Permissions
      HttpRouter.get("/permission", Effect.flatMap(directory, (dir) => Effect.map(broker.pending(dir), (all) => json(all.map((p) => p.request))))),
      HttpRouter.post(
        "/permission/:id/reply",
        Effect.gen(function*() {
          const { id } = yield* params(SessionParams)
          return yield* reply(id, yield* body(ReplyBody))
        })
      ),
      HttpRouter.post(
        "/session/:id/permissions/:permissionID",
        Effect.gen(function*() {
          const { permissionID } = yield* params(PermissionParams)
          const { response } = yield* body(LegacyReplyBody)
          return yield* reply(permissionID, { reply: response })
        })
      ),
      HttpRouter.get("/question", Effect.succeed(json([]))),
      HttpRouter.concat(yield* Dashboard.router(options)),
      HttpRouter.catchTags({
        SessionNotFound: respondError,
        PermissionNotFound: respondError,
        DirectoryRejected: respondError,
        BadRequest: respondError,
        SessionFailed: respondError
      })
    )
  })

/** Token and Origin, before any route; CORS only for configured origins. */
export const guard = (options: Options) =>
  HttpMiddleware.make((app) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const origin = request.headers["origin"]
      const allowed = origin === undefined || sameOrigin(origin, request.headers["host"]) || (options.origins ?? []).includes(origin)
      if (!allowed) return error(403, "ForbiddenOrigin", `origin ${origin} is not allowed`)
      const cors = origin === undefined ? {} : {
        "access-control-allow-origin": origin,
        "access-control-allow-credentials": "true",
        "access-control-allow-headers": "authorization, content-type, last-event-id, accept-event-version, x-opencode-directory, x-opencode-workspace",
        "access-control-allow-methods": "GET, POST, PATCH, DELETE, OPTIONS",
        vary: "origin"
      }
      if (request.method === "OPTIONS") return HttpServerResponse.empty({ status: 204, headers: cors })
      if (!Dashboard.isPublic(request) && !authorizedRequest(request, options.token)) {
        return HttpServerResponse.unsafeJson(
          { name: "Unauthorized", data: { message: "a valid token is required (Authorization: Bearer <token>, or basic auth with it as the password)" } },
          { status: 401, headers: { ...cors, "www-authenticate": "Basic realm=\"skein\"" } }
        )
      }
      const response = yield* app.pipe(
        Effect.catchIf(
          (e) => HttpServerError.isServerError(e) && e._tag === "RouteNotFound",
          () => Effect.succeed(error(404, "NotFoundError", `no route ${request.method} ${request.url}`))
        )
      )
      return origin === undefined ? response : HttpServerResponse.setHeaders(response, cors)
    })
  )

/** The server as a layer: serve it over any `HttpServer` (NodeHttpServer in production, port 0 in tests). */
export const layer = (options: Options) =>
  Layer.unwrapEffect(Effect.map(router(options), (app) => HttpServer.serve(app, guard(options))))
