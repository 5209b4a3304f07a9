/**
 * The web dashboard at `/`: static HTML, CSS and ES modules from the
 * package's `static/` folder, with no build step and nothing loaded from
 * outside the server (the page's Content-Security-Policy says `'self'`).
 *
 * A browser's `EventSource` cannot send an `Authorization` header, so the
 * page authenticates with a cookie: `/?token=…` (or the login form) sets
 * the token as an HttpOnly, SameSite=Strict cookie, which the guard accepts
 * like the bearer token. The assets themselves hold no data and are public,
 * so an unauthenticated visit gets the login form rather than a JSON 401.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { isTooLarge, loginBytes, tooLargeMessage } from "./internal/bodyLimit.js"
import { authorizedRequest, error, sameSecret, tokenCookie } from "./internal/http.js"
import { SessionRegistry } from "./SessionRegistry.js"

/** Where the assets live, relative to this module (`src/` in the source tree). */
export const staticDir = fileURLToPath(new URL("../static/", import.meta.url))

/** Served path → file in `static/` and its content type. */
const assets: ReadonlyArray<readonly [HttpRouter.PathInput, string, string]> = [
  ["/", "index.html", "text/html; charset=utf-8"],
  ["/dashboard/style.css", "style.css", "text/css; charset=utf-8"],
  ["/dashboard/app.js", "app.js", "text/javascript; charset=utf-8"],
  ["/dashboard/store.js", "store.js", "text/javascript; charset=utf-8"],
  ["/dashboard/view.js", "view.js", "text/javascript; charset=utf-8"]
]

const publicGets = new Set([...assets.map(([path]) => path), "/dashboard/auth"])

/** Requests the guard lets through without a token: the assets and the login itself (the Origin check still applies). */
export const isPublic = (request: HttpServerRequest.HttpServerRequest): boolean => {
  const path = new URL(request.url, "http://localhost").pathname
  return (request.method === "GET" && publicGets.has(path)) || (request.method === "POST" && path === "/dashboard/login")
}

const securityHeaders = {
  "content-security-policy":
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  "x-content-type-options": "nosniff",
  // A `?token=` in the address never leaves in a Referer.
  "referrer-policy": "no-referrer",
  "cache-control": "no-cache"
}

const LoginBody = Schema.Struct({ token: Schema.String })

const withCookie = (response: HttpServerResponse.HttpServerResponse, token: Redacted.Redacted<string>) =>
  HttpServerResponse.unsafeSetCookie(response, tokenCookie, Redacted.value(token), { httpOnly: true, sameSite: "strict", path: "/" })

/** The dashboard's routes; `Server` mounts them next to the opencode ones. */
export const router = (options: { readonly token: Redacted.Redacted<string> }) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const registry = yield* SessionRegistry
    // Read once at start: the assets are small and never change while serving.
    const files = yield* Effect.forEach(assets, ([path, file, contentType]) =>
      Effect.map(fs.readFile(Path.join(staticDir, file)), (bytes) => [path, bytes, contentType] as const))

    const asset = (bytes: Uint8Array, contentType: string) =>
      HttpServerResponse.uint8Array(bytes, { contentType, headers: securityHeaders })

    /** `/?token=…`: a valid token becomes the cookie and the address loses it; a wrong one gets the page with a 401. */
    const index = (bytes: Uint8Array, contentType: string) =>
      Effect.map(HttpServerRequest.HttpServerRequest, (request) => {
        const url = new URL(request.url, "http://localhost")
        const given = url.searchParams.get("token")
        if (given === null) return asset(bytes, contentType)
        if (!sameSecret(given, options.token)) {
          return HttpServerResponse.uint8Array(bytes, { status: 401, contentType, headers: securityHeaders })
        }
        url.searchParams.delete("token")
        return withCookie(HttpServerResponse.redirect(`/${url.search}`, { status: 303, headers: securityHeaders }), options.token)
      })

    const login = Effect.gen(function*() {
      const body = yield* HttpServerRequest.schemaBodyJson(LoginBody).pipe(Effect.either)
      if (Either.isLeft(body) && isTooLarge(body.left)) return error(413, "PayloadTooLarge", tooLargeMessage(loginBytes))
      if (Either.isLeft(body) || !sameSecret(body.right.token, options.token)) {
        return error(401, "Unauthorized", "wrong token")
      }
      return withCookie(HttpServerResponse.empty({ status: 204 }), options.token)
    })

    const auth = Effect.map(HttpServerRequest.HttpServerRequest, (request) =>
      HttpServerResponse.unsafeJson({ authenticated: authorizedRequest(request, options.token) }))

    // Every directory's sessions (`GET /session` is one directory's).
    const sessions = registry.list().pipe(
      Effect.map((all) => HttpServerResponse.unsafeJson(all)),
      Effect.catchAll((e) => Effect.succeed(error(500, "UnknownError", e.message)))
    )

    const assetRoutes = files.map(([path, bytes, contentType]) =>
      HttpRouter.makeRoute("GET", path, path === "/" ? index(bytes, contentType) : Effect.succeed(asset(bytes, contentType)))
    )
    const logout = HttpServerResponse.expireCookie(HttpServerResponse.empty({ status: 204 }), tokenCookie, { path: "/" })
    return HttpRouter.fromIterable(assetRoutes).pipe(
      HttpRouter.get("/dashboard/auth", auth),
      HttpRouter.post("/dashboard/login", login),
      HttpRouter.post("/dashboard/logout", Effect.succeed(logout)),
      HttpRouter.get("/dashboard/sessions", sessions)
    )
  })
