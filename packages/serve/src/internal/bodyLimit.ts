/**
 * How large a request body each route takes. JSON routes take a few MB; the
 * prompt routes carry files as data URLs (up to `maxFileBytes` each, a third
 * more in base64), and the login takes a token. A body over the limit is
 * answered 413 before it is read: by its `Content-Length` at once, or, sent
 * chunked, as soon as the bytes read pass the limit.
 */
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { maxFileBytes } from "./promptContent.js"

export const jsonBytes = 4 * 1024 * 1024
export const promptBytes = Math.ceil(maxFileBytes * 4 / 3) + jsonBytes
export const loginBytes = 64 * 1024

const prompt = /^\/session\/[^/]+\/(message|prompt_async)$/

export const limitOf = (request: HttpServerRequest.HttpServerRequest): number => {
  const path = new URL(request.url, "http://localhost").pathname
  if (path === "/dashboard/login") return loginBytes
  return prompt.test(path) ? promptBytes : jsonBytes
}

/** The declared length, when the client declared one. */
export const declaredLength = (request: HttpServerRequest.HttpServerRequest): number | undefined => {
  const header = request.headers["content-length"]
  if (header === undefined || !/^\d+$/.test(header)) return undefined
  return Number(header)
}

/** A read that stopped at the limit (the platform's `maxBytes`). */
export const isTooLarge = (error: unknown): boolean =>
  typeof error === "object" && error !== null && "cause" in error && error.cause instanceof Error &&
  error.cause.message === "maxBytes exceeded"

export const tooLargeMessage = (limit: number) => `the body is larger than this route takes (${limit} bytes)`
