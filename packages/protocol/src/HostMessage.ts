/**
 * Messages the host writes to the CLI's stdin in stream-json mode.
 */
import * as Schema from "effect/Schema"
import * as Anthropic from "./Anthropic.js"
import * as Control from "./Control.js"
import * as Lenient from "./Lenient.js"
import * as Ndjson from "./Ndjson.js"

/** A user turn. `content` is a string or content blocks (text, images, documents). */
export const UserInput = Schema.Struct({
  type: Schema.Literal("user"),
  message: Schema.Struct({
    role: Schema.Literal("user"),
    content: Schema.Union(Schema.String, Schema.Array(Anthropic.ContentBlock))
  }),
  parent_tool_use_id: Schema.optional(Schema.NullOr(Schema.String)),
  session_id: Schema.optional(Schema.String),
  uuid: Schema.optional(Schema.String),
  priority: Schema.optional(Schema.String)
})
export interface UserInput extends Schema.Schema.Type<typeof UserInput> {}

export const KeepAlive = Schema.Struct({ type: Schema.Literal("keep_alive") })
export interface KeepAlive extends Schema.Schema.Type<typeof KeepAlive> {}

export type HostMessage =
  | UserInput
  | Control.HostRequest
  | Control.ControlResponse
  | Control.CancelRequest
  | KeepAlive

export const decoder: Lenient.Decoder<HostMessage> = Lenient.make<HostMessage>({
  user: Lenient.schema(UserInput),
  control_request: Lenient.subtypes(Control.HostRequests, Control.nestedSubtype("request")),
  control_response: Lenient.subtypes(
    { success: Control.SuccessResponse, error: Control.ErrorResponse },
    Control.nestedSubtype("response")
  ),
  control_cancel_request: Lenient.schema(Control.CancelRequest),
  keep_alive: Lenient.schema(KeepAlive)
})

/** A user turn from text or content blocks. */
export const user = (
  content: string | ReadonlyArray<Anthropic.ContentBlock>,
  options?: { readonly uuid?: string; readonly session_id?: string; readonly priority?: string }
): UserInput => ({
  type: "user",
  message: { role: "user", content },
  parent_tool_use_id: null,
  ...options
})

/** One stdin line. Wire messages are plain JSON values, so encoding is `JSON.stringify`. */
export const encode = (message: HostMessage): string => Ndjson.encodeLine(message)
