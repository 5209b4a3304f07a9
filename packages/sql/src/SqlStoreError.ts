/**
 * The failures of the SQL store a caller can act on.
 *
 * @since 0.0.0
 */
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"

/**
 * `--store` is neither `sqlite:<file>` nor `postgres://…`.
 *
 * @since 0.0.0
 */
export class BadStoreUrl extends Schema.TaggedError<BadStoreUrl>()("BadStoreUrl", {
  input: Schema.String
}) {
  override get message() {
    return `--store must be sqlite:<file> or postgres://…, got ${JSON.stringify(this.input)}`
  }
}

/**
 * The database could not be reached or migrated when the layer started.
 * The URL is kept `Redacted`: its message shows it with the password masked.
 *
 * @since 0.0.0
 */
export class StoreUnavailable extends Schema.TaggedError<StoreUnavailable>()("StoreUnavailable", {
  url: Schema.Redacted(Schema.String),
  reason: Schema.String
}) {
  override get message() {
    return `the session store at ${maskPassword(Redacted.value(this.url))} is unavailable: ${this.reason}`
  }
}

/**
 * A query failed after start (the database went away mid-session). What it
 * was doing is named; the caller retries later or reports `session.error`.
 *
 * @since 0.0.0
 */
export class StoreFailed extends Schema.TaggedError<StoreFailed>()("StoreFailed", {
  operation: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `session store: ${this.operation} failed: ${this.reason}`
  }
}

/**
 * A mirrored transcript does not match the file on disk at the same offset:
 * another writer changed one of them. Never overwritten silently.
 *
 * @since 0.0.0
 */
export class MirrorDiverged extends Schema.TaggedError<MirrorDiverged>()("MirrorDiverged", {
  cliSessionId: Schema.String,
  file: Schema.String,
  offset: Schema.Number,
  reason: Schema.String
}) {
  override get message() {
    return `transcript mirror of ${this.file} diverges from the file at byte ${this.offset}: ${this.reason}`
  }
}

/** `scheme://user:secret@host` → `scheme://user:***@host`; anything else unchanged. */
export const maskPassword = (url: string): string => url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]*:)[^@]*@/i, "$1***@")

/** A short reason from any cause, without the URL the driver may echo. */
export const reasonOf = (cause: unknown): string => {
  const inner = typeof cause === "object" && cause !== null && "cause" in cause ? cause.cause : undefined
  const text = (c: unknown) => c instanceof Error ? c.message : typeof c === "object" && c !== null && "message" in c ? String(c.message) : String(c)
  return maskPassword(inner === undefined ? text(cause) : `${text(cause)}: ${text(inner)}`)
}

/**
 * `restore` found no mirrored transcript for this CLI session.
 *
 * @since 0.0.0
 */
export class TranscriptNotMirrored extends Schema.TaggedError<TranscriptNotMirrored>()("TranscriptNotMirrored", {
  cliSessionId: Schema.String
}) {
  override get message() {
    return `no transcript of ${this.cliSessionId} is mirrored in the session store`
  }
}
