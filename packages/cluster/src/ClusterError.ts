/**
 * The failures the cluster adds to serve's own.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * A prompt whose turn had started on a runner that died: it is delivered
 * again (cluster delivery is at least once) but never sent to the CLI
 * twice. The turn ends with a `session.error` of this name; the next prompt
 * continues from the history the dead runner had mirrored.
 *
 * @since 0.1.0
 */
export class RunnerLost extends Schema.TaggedError<RunnerLost>()("RunnerLost", {
  sessionID: Schema.String,
  messageID: Schema.String
}) {
  override get message() {
    return `session ${this.sessionID}: the runner running prompt ${this.messageID} was lost mid-turn; the prompt is not run again`
  }
}

/**
 * The cluster could not take or deliver a message (storage down, a mailbox
 * full). Serve answers it as a `SessionFailed`.
 *
 * @since 0.1.0
 */
export class ClusterUnavailable extends Schema.TaggedError<ClusterUnavailable>()("ClusterUnavailable", {
  sessionID: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `session ${this.sessionID}: the cluster could not deliver the message: ${this.reason}`
  }
}
