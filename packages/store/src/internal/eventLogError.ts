/**
 * The event log's one error, here so that its internal units can raise it;
 * `EventLog` re-exports it as its own.
 */
import type { PlatformError } from "@effect/platform/Error"
import * as Schema from "effect/Schema"

/** The log's folder or a segment could not be read or written. */
export class EventLogError extends Schema.TaggedError<EventLogError>()("EventLogError", {
  path: Schema.String,
  message: Schema.String
}) {}

export const failAt = (path: string) => (error: PlatformError): EventLogError =>
  new EventLogError({ path, message: error.message })
