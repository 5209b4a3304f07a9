/**
 * A served session as a cluster entity, keyed by its `ses_` id: whichever
 * runner holds the session's shard runs its CLI, and every runner's HTTP
 * edge reaches it through the entity's client.
 *
 * `Prompt` is persisted with the prompt's message id as its primary key: a
 * retried prompt (the same id) is answered from the stored reply and never
 * runs twice. Everything else dies with its runner, as a request to a
 * process that died does.
 *
 * @since 0.1.0
 */
import * as ClusterSchema from "@effect/cluster/ClusterSchema"
import * as Entity from "@effect/cluster/Entity"
import * as Rpc from "@effect/rpc/Rpc"
import { Anthropic, Canonical } from "@skein/protocol"
import { ServeError } from "@skein/serve"
import * as Schema from "effect/Schema"
import { RunnerLost } from "./ClusterError.js"

/**
 * A prompt's content, as the registry takes it.
 *
 * @since 0.1.0
 */
export const Content = Schema.Union(Schema.String, Schema.Array(Anthropic.ContentBlock))

/**
 * A message with its parts (`History.WithParts`).
 *
 * @since 0.1.0
 */
export const WithParts = Schema.Struct({ info: Canonical.MessageInfo, parts: Schema.Array(Canonical.Part) })

/**
 * serve's `SessionInfo`.
 *
 * @since 0.1.0
 */
export const SessionInfo = Schema.Struct({
  ...Canonical.SessionInfo.fields,
  slug: Schema.String,
  projectID: Schema.String,
  cliSessionId: Schema.String
})

/**
 * What a session's operations fail with: serve's registry errors, and a lost turn.
 *
 * @since 0.1.0
 */
export const Failure = Schema.Union(
  ServeError.SessionNotFound,
  ServeError.DirectoryRejected,
  ServeError.SessionFailed,
  ServeError.MessageNotFound,
  RunnerLost
)

/**
 * Runs one turn to its end; persisted, keyed by the prompt's message id.
 *
 * @since 0.1.0
 */
export const Prompt = Rpc.make("Prompt", {
  payload: {
    messageID: Schema.String,
    content: Content,
    model: Schema.optional(Schema.NullOr(Schema.String))
  },
  primaryKey: (payload) => payload.messageID,
  success: WithParts,
  error: Failure
}).annotate(ClusterSchema.Persisted, true)

/**
 * @since 0.1.0
 */
export const Abort = Rpc.make("Abort", { success: Schema.Boolean, error: Failure })

/**
 * @since 0.1.0
 */
export const Summarize = Rpc.make("Summarize", { error: Failure })

/**
 * @since 0.1.0
 */
export const Fork = Rpc.make("Fork", { payload: { messageID: Schema.optional(Schema.String) }, success: SessionInfo, error: Failure })

/**
 * @since 0.1.0
 */
export const Update = Rpc.make("Update", { payload: { title: Schema.optional(Schema.String) }, success: SessionInfo, error: Failure })

/**
 * @since 0.1.0
 */
export const Remove = Rpc.make("Remove", { error: Failure })

/**
 * @since 0.1.0
 */
export const Messages = Rpc.make("Messages", { success: Schema.Array(WithParts), error: Failure })

/**
 * Stops the session's CLI (its transcript stays).
 *
 * @since 0.1.0
 */
export const Stop = Rpc.make("Stop")

/**
 * A client's reply to a permission ask of this session's CLI, whichever
 * runner's edge took it: only the runner running the CLI holds the ask.
 *
 * @since 0.1.0
 */
export const ReplyPermission = Rpc.make("ReplyPermission", {
  payload: { requestID: Schema.String, reply: Canonical.PermissionReply, message: Schema.optional(Schema.String) },
  error: ServeError.PermissionNotFound
})

/**
 * A client's answer to (or dismissal of) an `AskUserQuestion` question of this session's CLI.
 *
 * @since 0.1.0
 */
export const AnswerQuestion = Rpc.make("AnswerQuestion", {
  payload: {
    requestID: Schema.String,
    answer: Schema.Union(
      Schema.TaggedStruct("Answered", { answers: Schema.Array(Schema.Array(Schema.String)) }),
      Schema.TaggedStruct("Rejected", { reason: Schema.String })
    )
  },
  error: ServeError.QuestionNotFound
})

/**
 * @since 0.1.0
 */
export const SessionEntity = Entity.make("Session", [
  Prompt,
  Abort,
  Summarize,
  Fork,
  Update,
  Remove,
  Messages,
  Stop,
  ReplyPermission,
  AnswerQuestion
])
