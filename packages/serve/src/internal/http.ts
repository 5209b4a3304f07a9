/**
 * The edge's checks and answers: opencode's error body, bearer or basic
 * auth, the Origin check, and `directory` confined to the roots.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Crypto from "node:crypto"
import * as Path from "node:path"
import { DirectoryRejected } from "../ServeError.js"

export const error = (status: number, name: string, message: string) =>
  HttpServerResponse.unsafeJson({ name, data: { message } }, { status })

export const sameSecret = (a: string, b: Redacted.Redacted<string>) => {
  const x = Buffer.from(a)
  const y = Buffer.from(Redacted.value(b))
  return x.length === y.length && Crypto.timingSafeEqual(x, y)
}

/** `Bearer <token>`, or basic auth with the token as the password (opencode's clients send that). */
export const authorized = (header: string | undefined, token: Redacted.Redacted<string>): boolean => {
  if (header === undefined) return false
  const [scheme, value] = header.split(" ", 2)
  if (value === undefined) return false
  if (scheme?.toLowerCase() === "bearer") return sameSecret(value, token)
  if (scheme?.toLowerCase() === "basic") {
    const decoded = Buffer.from(value, "base64").toString("utf8")
    const colon = decoded.indexOf(":")
    return colon >= 0 && sameSecret(decoded.slice(colon + 1), token)
  }
  return false
}

/** The dashboard's cookie: the token, HttpOnly and SameSite=Strict (EventSource cannot send a header). */
export const tokenCookie = "skein_token"

/** The Authorization header (bearer or basic), or the dashboard's cookie. */
export const authorizedRequest = (request: HttpServerRequest.HttpServerRequest, token: Redacted.Redacted<string>): boolean => {
  const cookie = request.cookies[tokenCookie]
  return authorized(request.headers["authorization"], token) || (cookie !== undefined && sameSecret(cookie, token))
}

/** The name in a `Host` header, without its port (`[::1]:4096` is `::1`), lower case. */
export const hostName = (host: string): string => {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(host)
  if (bracketed !== null) return bracketed[1]!.toLowerCase()
  const colon = host.lastIndexOf(":")
  return (colon >= 0 && host.indexOf(":") === colon ? host.slice(0, colon) : host).toLowerCase()
}

const loopbackNames = new Set(["127.0.0.1", "localhost", "::1"])

/**
 * A `Host` the server answers to: a loopback name, or one configured. A
 * DNS-rebinding page reaches the server under its own name, so its `Origin`
 * matches its `Host`; refusing foreign names in `Host` closes that door.
 */
export const allowedHost = (host: string | undefined, hosts: ReadonlyArray<string>): boolean => {
  if (host === undefined) return false
  const name = hostName(host)
  return loopbackNames.has(name) || hosts.some((h) => h.toLowerCase() === name)
}

/** An `Origin` that is the server's own (by `Host`): the dashboard's page calling back. */
export const sameOrigin = (origin: string, host: string | undefined): boolean =>
  host !== undefined && (origin === `http://${host}` || origin === `https://${host}`)

/**
 * The request's `directory` (query `directory` or the 1.18 TUI's
 * `location[directory]`, else `x-opencode-directory`, else the first root),
 * physical and inside a root.
 */
export const directoryOf = (
  request: HttpServerRequest.HttpServerRequest,
  roots: ReadonlyArray<string>
): Effect.Effect<string, DirectoryRejected, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const url = new URL(request.url, "http://localhost")
    const header = request.headers["x-opencode-directory"]
    const query = url.searchParams.get("directory") ?? url.searchParams.get("location[directory]")
    const raw = query ?? (header === undefined ? undefined : safeDecode(header))
    if (raw === undefined || raw === "") return roots[0] ?? process.cwd()
    if (raw.split(/[\\/]/).includes("..")) return yield* new DirectoryRejected({ directory: raw, reason: "`..` is not allowed" })
    if (!Path.isAbsolute(raw)) return yield* new DirectoryRejected({ directory: raw, reason: "not an absolute path" })
    const fs = yield* FileSystem.FileSystem
    // The physical path: a symlink inside a root that points outside it is outside.
    const real = yield* fs.realPath(raw).pipe(
      Effect.mapError(() => new DirectoryRejected({ directory: raw, reason: "no such directory" }))
    )
    if (!insideRoots(roots, real)) return yield* new DirectoryRejected({ directory: raw, reason: "outside the server's roots" })
    return real
  })

/** A physical path in one of the roots (the root itself included). */
export const insideRoots = (roots: ReadonlyArray<string>, path: string): boolean =>
  roots.some((root) => path === root || path.startsWith(root.endsWith(Path.sep) ? root : root + Path.sep))

const safeDecode = (text: string) => {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

/** SSE frame: the log's seq as `id:`, the event as JSON `data:`. */
export const frame = (id: number, data: unknown) => `id: ${id}\ndata: ${JSON.stringify(data)}\n\n`

export const sseHeaders = {
  "cache-control": "no-cache, no-transform",
  "x-accel-buffering": "no",
  connection: "keep-alive"
}
