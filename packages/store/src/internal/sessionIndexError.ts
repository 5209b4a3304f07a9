/**
 * The session index's one error, here so that its internal units can raise
 * it; `SessionIndex` re-exports it as its own.
 */
import type { PlatformError } from "@effect/platform/Error"
import * as Schema from "effect/Schema"

/** A folder or marker could not be read or written. */
export class SessionIndexError extends Schema.TaggedError<SessionIndexError>()("SessionIndexError", {
  path: Schema.String,
  message: Schema.String
}) {}

export const indexError = (path: string) => (error: PlatformError): SessionIndexError =>
  new SessionIndexError({ path, message: error.message })
