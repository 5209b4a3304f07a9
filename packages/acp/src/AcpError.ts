/**
 * What an ACP request can fail with, one error per failure a client can act
 * on. Each becomes a JSON-RPC error (`toRequestError`): the code says what
 * kind of failure it is, `data` carries the fields.
 */
import * as Schema from "effect/Schema"

/** No session of this id: not live here, and no transcript of it in the store. */
export class SessionNotFound extends Schema.TaggedError<SessionNotFound>()("SessionNotFound", {
  sessionId: Schema.String
}) {
  override get message(): string {
    return `no session ${this.sessionId}`
  }
}

/** A prompt came while the session's last one still runs: ACP runs one prompt at a time per session. */
export class PromptInProgress extends Schema.TaggedError<PromptInProgress>()("PromptInProgress", {
  sessionId: Schema.String
}) {
  override get message(): string {
    return `session ${this.sessionId} is still answering its last prompt`
  }
}

/** The Claude Code CLI behind the session ended: its exit code or signal, and the end of what it printed on stderr. */
export class CliDied extends Schema.TaggedError<CliDied>()("CliDied", {
  sessionId: Schema.String,
  exitCode: Schema.NullOr(Schema.Number),
  signal: Schema.NullOr(Schema.String),
  stderrTail: Schema.String
}) {
  override get message(): string {
    const how = this.signal !== null ? `signal ${this.signal}` : `code ${this.exitCode}`
    const tail = this.stderrTail.trim()
    return `the Claude Code CLI exited with ${how}${tail.length > 0 ? `: ${tail.slice(-500)}` : ""}`
  }
}

/** The session could not be started, loaded or changed (an unknown mode, a transcript that does not read, …). */
export class SessionFailed extends Schema.TaggedError<SessionFailed>()("SessionFailed", {
  sessionId: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `session ${this.sessionId}: ${this.reason}`
  }
}

export type AcpError = SessionNotFound | PromptInProgress | CliDied | SessionFailed

/** JSON-RPC codes: ACP's "resource not found", the server-error range, invalid params. */
export const codeOf = (error: AcpError): number => {
  switch (error._tag) {
    case "SessionNotFound":
      return -32002
    case "PromptInProgress":
      return -32600
    case "CliDied":
      return -32603
    case "SessionFailed":
      return -32603
  }
}

/** The error's fields, without its tag's class machinery: what goes in the JSON-RPC error's `data`. */
export const dataOf = (error: AcpError): Record<string, unknown> => {
  const { _tag, ...fields } = { ...error }
  return { kind: _tag, ...fields }
}
