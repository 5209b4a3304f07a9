/**
 * The failures a client of the server can act on. Each answers with
 * opencode's error body `{name, data: {message}}` and its own status.
 */
import * as Schema from "effect/Schema"

/** No live session and no transcript has this id. 404. */
export class SessionNotFound extends Schema.TaggedError<SessionNotFound>()("SessionNotFound", {
  sessionID: Schema.String
}) {
  override get message() {
    return `session ${this.sessionID} not found`
  }
}

/** No pending ask has this id: it was answered already, timed out, or never existed. 404. */
export class PermissionNotFound extends Schema.TaggedError<PermissionNotFound>()("PermissionNotFound", {
  requestID: Schema.String
}) {
  override get message() {
    return `permission request ${this.requestID} is not pending (already answered, timed out, or unknown)`
  }
}

/** The session has no message with this id (in its effective history). 404. */
export class MessageNotFound extends Schema.TaggedError<MessageNotFound>()("MessageNotFound", {
  sessionID: Schema.String,
  messageID: Schema.String
}) {
  override get message() {
    return `message ${this.messageID} not found in session ${this.sessionID}`
  }
}

/** No pending question has this id: answered, rejected, timed out, or unknown. 404. */
export class QuestionNotFound extends Schema.TaggedError<QuestionNotFound>()("QuestionNotFound", {
  requestID: Schema.String
}) {
  override get message() {
    return `question ${this.requestID} is not pending (already answered, timed out, or unknown)`
  }
}

/** The `directory` is outside the configured roots, or not a folder. 403. */
export class DirectoryRejected extends Schema.TaggedError<DirectoryRejected>()("DirectoryRejected", {
  directory: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `directory ${this.directory} rejected: ${this.reason}`
  }
}

/** The session could not be started or driven (the CLI exited, refused, …). 500. */
export class SessionFailed extends Schema.TaggedError<SessionFailed>()("SessionFailed", {
  sessionID: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `session ${this.sessionID}: ${this.reason}`
  }
}

export type RegistryError = SessionNotFound | DirectoryRejected | SessionFailed

/** Every failure a route can answer with. */
export type ServeError = RegistryError | MessageNotFound | PermissionNotFound | QuestionNotFound
