/**
 * What can go wrong with a session, one error per failure a caller can act on.
 */
import * as Schema from "effect/Schema"

/** The CLI process ended: pending turns and requests fail with this. */
export class CliExited extends Schema.TaggedError<CliExited>()("CliExited", {
  code: Schema.NullOr(Schema.Number),
  signal: Schema.NullOr(Schema.String),
  stderrTail: Schema.String
}) {
  override get message(): string {
    const how = this.signal !== null ? `signal ${this.signal}` : `code ${this.code}`
    return `the Claude Code CLI exited with ${how}${this.stderrTail.length > 0 ? `: ${this.stderrTail.slice(-500)}` : ""}`
  }
}

/** Neither the installed `@anthropic-ai/claude-code` package nor PATH has the CLI. */
export class CliNotFound extends Schema.TaggedError<CliNotFound>()("CliNotFound", {
  searched: Schema.Array(Schema.String)
}) {
  override get message(): string {
    return `the Claude Code CLI was not found (searched: ${this.searched.join(", ")}); install @anthropic-ai/claude-code or pass an executable path`
  }
}

/** The process could not be started. */
export class SpawnFailed extends Schema.TaggedError<SpawnFailed>()("SpawnFailed", {
  command: Schema.String,
  reason: Schema.String
}) {}

/** The CLI answered a control request with an error. */
export class ControlError extends Schema.TaggedError<ControlError>()("ControlError", {
  subtype: Schema.String,
  requestId: Schema.String,
  error: Schema.String
}) {
  override get message(): string {
    return `${this.subtype} (${this.requestId}) failed: ${this.error}`
  }
}

/** A control request got no answer in time; it was withdrawn with `control_cancel_request`. */
export class ControlTimeout extends Schema.TaggedError<ControlTimeout>()("ControlTimeout", {
  subtype: Schema.String,
  requestId: Schema.String,
  timeoutMillis: Schema.Number
}) {}

/** `--resume` named a session whose transcript is not on disk under the CLI's config root. */
export class ResumeMismatch extends Schema.TaggedError<ResumeMismatch>()("ResumeMismatch", {
  expected: Schema.String,
  actual: Schema.NullOr(Schema.String),
  reason: Schema.String
}) {}

/** The session was silent for longer than its watchdog allows. */
export class SessionSilent extends Schema.TaggedError<SessionSilent>()("SessionSilent", {
  silentMillis: Schema.Number
}) {}

/** The session is closed (its scope closed or it was stopped); nothing more can be sent. */
export class SessionClosed extends Schema.TaggedError<SessionClosed>()("SessionClosed", {}) {}

/**
 * With `outputSchema`, the turn's structured output is missing (the turn was
 * interrupted or failed, say) or does not decode; `issue` is the schema's message.
 */
export class StructuredOutputInvalid extends Schema.TaggedError<StructuredOutputInvalid>()("StructuredOutputInvalid", {
  issue: Schema.String,
  output: Schema.Unknown
}) {
  override get message(): string {
    return `the turn's structured output does not match its schema: ${this.issue}`
  }
}

/**
 * The turn ended, but with an error instead of the model's answer: its
 * `result` reports an error, or its only assistant message is the CLI's own
 * synthetic error message (no login, an API error it gave up on). `text` is
 * what the CLI said (`Not logged in · Please run /login`); `reason` is its
 * code for it (`authentication_failed`), else the result's subtype.
 * A turn's summary carries it as `failure`; `Turn.succeeded` fails with it.
 */
export class TurnFailed extends Schema.TaggedError<TurnFailed>()("TurnFailed", {
  reason: Schema.String,
  text: Schema.String
}) {
  override get message(): string {
    return this.text
  }
}

/** Every way a turn can fail. */
export type TurnError = CliExited | SessionSilent | SessionClosed

/** Every way a control request can fail. */
export type RequestError = ControlError | ControlTimeout | CliExited | SessionSilent | SessionClosed
