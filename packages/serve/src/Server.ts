/**
 * The opencode-compatible HTTP + SSE server over a `SessionRegistry`.
 *
 * The JSON routes are `ServeApi` (an `HttpApi`: schemas for every body and
 * answer, the OpenAPI document at `/doc`, Swagger UI at `/doc/ui` with its
 * assets inlined, so nothing loads from a CDN); the SSE routes and the
 * dashboard sit beside it on one `HttpLayerRouter`.
 *
 * Security is on by default: it binds 127.0.0.1, every request needs the
 * token (bearer, or basic auth with the token as the password, as
 * opencode's clients send it), a browser `Origin` must be configured, and
 * `directory` stays inside the roots. Bodies are decoded by schemas; bad
 * input gets a 400 with the schema's message.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpApiSwagger from "@effect/platform/HttpApiSwagger"
import * as HttpLayerRouter from "@effect/platform/HttpLayerRouter"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServerError from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerRespondable from "@effect/platform/HttpServerRespondable"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Redacted from "effect/Redacted"
import * as Dashboard from "./Dashboard.js"
import * as DirectoryHandler from "./internal/handlers/directory.js"
import * as DiscoveryHandlers from "./internal/handlers/discovery.js"
import * as MessageHandlers from "./internal/handlers/messages.js"
import * as PermissionHandlers from "./internal/handlers/permissions.js"
import * as SessionHandlers from "./internal/handlers/sessions.js"
import * as BodyLimit from "./internal/bodyLimit.js"
import { allowedHost, authorizedRequest, directoryOf, error, insideRoots, sameOrigin, sseHeaders } from "./internal/http.js"
import * as Sse from "./internal/sse.js"
import { PermissionBroker } from "./PermissionBroker.js"
import { ServeApi } from "./ServeApi.js"
import { ServerEvents } from "./ServerEvents.js"

export interface Options {
  /** The bearer token (and basic-auth password) every request must carry. */
  readonly token: Redacted.Redacted<string>
  /** Folders sessions may run in (physical paths); the first is the default `directory`. */
  readonly roots: ReadonlyArray<string>
  /** Browser origins allowed to call (CORS); a request from any other `Origin` gets 403. */
  readonly origins?: ReadonlyArray<string> | undefined
  /** Names the server answers to in `Host` besides the loopback ones (a request naming another gets 403). */
  readonly hosts?: ReadonlyArray<string> | undefined
  /** Where `/path` says state and config live. */
  readonly stateDir: string
  readonly configDir: string
  /** Default 10 s. */
  readonly heartbeat?: Duration.DurationInput | undefined
  /** A client more than this many events behind the log is sent `server.resync` and disconnected. Default 50,000. */
  readonly maxLag?: number | undefined
}

/**
 * `GET /event` (one directory) and `GET /global/event` (all, in
 * `{directory, payload}` envelopes). Node's server waits for every open
 * connection when it closes, so an event stream ends when `closing` does.
 */
const eventsRoute = (options: Options, global: boolean, closing: Deferred.Deferred<void>) =>
  Effect.gen(function*() {
    const events = yield* ServerEvents
    const broker = yield* PermissionBroker
    const fs = yield* FileSystem.FileSystem
    return Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const dir = global ? undefined : yield* Effect.provideService(directoryOf(request, options.roots), FileSystem.FileSystem, fs)
      const url = new URL(request.url, "http://localhost")
      const last = request.headers["last-event-id"] ?? url.searchParams.get("lastEventId") ?? undefined
      const lastEventId = last === undefined || last.trim() === "" ? undefined : last
      const stream = yield* Sse.stream({
        events,
        broker,
        directory: dir,
        lastEventId,
        visible: options.roots.length === 0 ? undefined : (directory) => insideRoots(options.roots, directory),
        // `?eventVersion=2`: the header, for EventSource, which cannot set one.
        canonicalOnly: (request.headers["accept-event-version"] ?? url.searchParams.get("eventVersion")) === "2",
        heartbeat: options.heartbeat ?? Duration.seconds(10),
        maxLag: options.maxLag ?? 50_000,
        until: Deferred.await(closing)
      })
      return HttpServerResponse.stream(stream, {
        contentType: "text/event-stream",
        headers: sseHeaders
      })
    }).pipe(Effect.catchTag("DirectoryRejected", (e) => Effect.succeed(error(403, "DirectoryRejected", e.message))))
  })

const sseRoutes = (options: Options) =>
  HttpLayerRouter.use((router) =>
    Effect.gen(function*() {
      const closing = yield* Deferred.make<void>()
      // Routes close before the server does: open streams end, so that its close does not wait on them.
      yield* Effect.addFinalizer(() => Deferred.succeed(closing, undefined))
      yield* router.add("GET", "/event", yield* eventsRoute(options, false, closing))
      yield* router.add("GET", "/global/event", yield* eventsRoute(options, true, closing))
    })
  )

/** The dashboard's `HttpRouter` routes, mounted as they are. */
const dashboardRoutes = (options: Options) =>
  HttpLayerRouter.use((router) =>
    Effect.gen(function*() {
      const dashboard = yield* Dashboard.router(options)
      for (const route of dashboard.routes) {
        // HEAD falls back to GET on this router.
        if (route.method === "HEAD") continue
        yield* router.add(
          route.method,
          route.path,
          route.handler.pipe(
            Effect.flatMap(HttpServerRespondable.toResponse),
            Effect.catchAll((e) => Effect.succeed(error(500, "UnknownError", String(e))))
          )
        )
      }
    })
  )

/** The API with its handlers and the directory guard; its OpenAPI document at `/doc`. */
const apiRoutes = (options: Options) =>
  HttpLayerRouter.addHttpApi(ServeApi, { openapiPath: "/doc" }).pipe(
    Layer.provide([
      DiscoveryHandlers.layer(options),
      DiscoveryHandlers.locationsLayer,
      SessionHandlers.layer,
      MessageHandlers.layer,
      PermissionHandlers.layer,
      PermissionHandlers.questionsLayer
    ]),
    Layer.provide(DirectoryHandler.layer(options.roots))
  )

const corsHeaders = (origin: string) => ({
  "access-control-allow-origin": origin,
  "access-control-allow-credentials": "true",
  "access-control-allow-headers": "authorization, content-type, last-event-id, accept-event-version, x-opencode-directory, x-opencode-workspace",
  "access-control-allow-methods": "GET, POST, PATCH, DELETE, OPTIONS",
  "access-control-expose-headers": "x-skein-message-id",
  vary: "origin"
})

/**
 * Host, Origin, body size and token before any route (unknown routes
 * included), CORS headers on the way out. A global router middleware, so its
 * headers reach the response that is written. The size is checked before the
 * token: a body too large is refused before a byte of it is read.
 */
export const guard = (options: Options) =>
  HttpLayerRouter.middleware((app) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      if (!allowedHost(request.headers["host"], options.hosts ?? [])) {
        return error(403, "ForbiddenHost", `host ${request.headers["host"] ?? "(none)"} is not one this server answers to`)
      }
      const origin = request.headers["origin"]
      const allowed = origin === undefined || sameOrigin(origin, request.headers["host"]) || (options.origins ?? []).includes(origin)
      if (!allowed) return error(403, "ForbiddenOrigin", `origin ${origin} is not allowed`)
      const cors = origin === undefined ? {} : corsHeaders(origin)
      if (request.method === "OPTIONS") return HttpServerResponse.empty({ status: 204, headers: cors })
      const limit = BodyLimit.limitOf(request)
      if ((BodyLimit.declaredLength(request) ?? 0) > limit) {
        // The connection closes: what the client still sends is not read.
        return HttpServerResponse.setHeaders(error(413, "PayloadTooLarge", BodyLimit.tooLargeMessage(limit)), { ...cors, connection: "close" })
      }
      if (!Dashboard.isPublic(request) && !authorizedRequest(request, options.token)) {
        return HttpServerResponse.unsafeJson(
          { name: "Unauthorized", data: { message: "a valid token is required (Authorization: Bearer <token>, or basic auth with it as the password)" } },
          { status: 401, headers: { ...cors, "www-authenticate": "Basic realm=\"skein\"" } }
        )
      }
      const response = yield* HttpServerRequest.withMaxBodySize(app, Option.some(limit))
      return origin === undefined ? response : HttpServerResponse.setHeaders(response, cors)
    }), { global: true })

/** An unknown route is opencode's 404 body, not an empty 404. */
const notFound = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E | HttpServerError.RouteNotFound, R>) =>
  Effect.catchIf(
    app,
    (e): e is HttpServerError.RouteNotFound => HttpServerError.isServerError(e) && e._tag === "RouteNotFound",
    (e) => Effect.succeed(error(404, "NotFoundError", `no route ${e.request.method} ${e.request.url}`))
  )

/** Every route of the server on one router. */
export const routes = (options: Options) =>
  Layer.mergeAll(
    apiRoutes(options),
    HttpApiSwagger.layerHttpLayerRouter({ api: ServeApi, path: "/doc/ui" }),
    sseRoutes(options),
    dashboardRoutes(options),
    guard(options)
  )

/**
 * A request that carries the token in its query (the dashboard's entry,
 * `/?token=`) makes no span: the platform's span records the full URL.
 */
const carriesToken = (request: HttpServerRequest.HttpServerRequest): boolean =>
  new URL(request.url, "http://skein.invalid").searchParams.has("token")

/** The server as a layer: serve it over any `HttpServer` (NodeHttpServer in production, port 0 in tests). */
export const layer = (options: Options) =>
  HttpLayerRouter.serve(routes(options), { disableLogger: true, disableListenLog: true, middleware: notFound }).pipe(
    HttpMiddleware.withTracerDisabledWhen(carriesToken)
  )
