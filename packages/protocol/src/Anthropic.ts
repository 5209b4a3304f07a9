/**
 * Schemas for the Anthropic Messages API: request and response messages,
 * content blocks and the server-sent stream events.
 *
 * Every schema here is a pure validator: its encoded type equals its decoded
 * type, so `Schema.is` can check a parsed JSON value and the caller may keep
 * the original object, which round-trips byte-for-byte through JSON. Structs
 * ignore excess fields (the API adds fields between releases); decode with
 * `{ onExcessProperty: "preserve" }` to keep them in the output. Block and
 * delta types the schemas do not know are kept as `OtherBlock`/`OtherDelta`,
 * while a malformed block of a known type fails.
 *
 * @since 0.0.0
 */
import { Schema } from "effect"
import { JsonObject, OtherTag, StringArray } from "./Json.js"


/** @since 0.0.0 */
export const CacheControl = Schema.Struct({
  type: Schema.String,
  ttl: Schema.optional(Schema.String)
})
/** @since 0.0.0 */
export interface CacheControl extends Schema.Schema.Type<typeof CacheControl> {}

/**
 * A citation attached to a text block. Several citation kinds exist (char,
 * page and block locations, search results); only the discriminator is checked.
 *
 * @since 0.0.0
 */
export const Citation = Schema.Struct({
  type: Schema.String
})
/** @since 0.0.0 */
export interface Citation extends Schema.Schema.Type<typeof Citation> {}

// ---------------------------------------------------------------------------
// Content blocks
// ---------------------------------------------------------------------------

/** @since 0.0.0 */
export const TextBlock = Schema.Struct({
  type: Schema.Literal("text"),
  text: Schema.String,
  citations: Schema.optional(Schema.NullOr(Schema.Array(Citation))),
  cache_control: Schema.optional(Schema.NullOr(CacheControl))
})
/** @since 0.0.0 */
export interface TextBlock extends Schema.Schema.Type<typeof TextBlock> {}

/** @since 0.0.0 */
export const ThinkingBlock = Schema.Struct({
  type: Schema.Literal("thinking"),
  thinking: Schema.String,
  signature: Schema.String
})
/** @since 0.0.0 */
export interface ThinkingBlock extends Schema.Schema.Type<typeof ThinkingBlock> {}

/** @since 0.0.0 */
export const RedactedThinkingBlock = Schema.Struct({
  type: Schema.Literal("redacted_thinking"),
  data: Schema.String
})
/** @since 0.0.0 */
export interface RedactedThinkingBlock extends Schema.Schema.Type<typeof RedactedThinkingBlock> {}

/** @since 0.0.0 */
export const ToolUseBlock = Schema.Struct({
  type: Schema.Literal("tool_use"),
  id: Schema.String,
  name: Schema.String,
  input: JsonObject,
  cache_control: Schema.optional(Schema.NullOr(CacheControl))
})
/** @since 0.0.0 */
export interface ToolUseBlock extends Schema.Schema.Type<typeof ToolUseBlock> {}

/** @since 0.0.0 */
export const Base64Source = Schema.Struct({
  type: Schema.Literal("base64"),
  media_type: Schema.String,
  data: Schema.String
})
/** @since 0.0.0 */
export interface Base64Source extends Schema.Schema.Type<typeof Base64Source> {}

/** @since 0.0.0 */
export const UrlSource = Schema.Struct({
  type: Schema.Literal("url"),
  url: Schema.String
})
/** @since 0.0.0 */
export interface UrlSource extends Schema.Schema.Type<typeof UrlSource> {}

/** @since 0.0.0 */
export const FileSource = Schema.Struct({
  type: Schema.Literal("file"),
  file_id: Schema.String
})
/** @since 0.0.0 */
export interface FileSource extends Schema.Schema.Type<typeof FileSource> {}

/** @since 0.0.0 */
export const PlainTextSource = Schema.Struct({
  type: Schema.Literal("text"),
  media_type: Schema.String,
  data: Schema.String
})
/** @since 0.0.0 */
export interface PlainTextSource extends Schema.Schema.Type<typeof PlainTextSource> {}

/** @since 0.0.0 */
export const ImageBlock = Schema.Struct({
  type: Schema.Literal("image"),
  source: Schema.Union(Base64Source, UrlSource, FileSource),
  cache_control: Schema.optional(Schema.NullOr(CacheControl))
})
/** @since 0.0.0 */
export interface ImageBlock extends Schema.Schema.Type<typeof ImageBlock> {}

/**
 * A document source whose content is a string or a list of text/image blocks.
 *
 * @since 0.0.0
 */
export const ContentSource = Schema.Struct({
  type: Schema.Literal("content"),
  content: Schema.Union(Schema.String, Schema.Array(Schema.Union(TextBlock, ImageBlock)))
})
/** @since 0.0.0 */
export interface ContentSource extends Schema.Schema.Type<typeof ContentSource> {}

/** @since 0.0.0 */
export const DocumentBlock = Schema.Struct({
  type: Schema.Literal("document"),
  source: Schema.Union(Base64Source, PlainTextSource, ContentSource, UrlSource, FileSource),
  title: Schema.optional(Schema.NullOr(Schema.String)),
  context: Schema.optional(Schema.NullOr(Schema.String)),
  citations: Schema.optional(Schema.NullOr(Schema.Struct({ enabled: Schema.optional(Schema.Boolean) }))),
  cache_control: Schema.optional(Schema.NullOr(CacheControl))
})
/** @since 0.0.0 */
export interface DocumentBlock extends Schema.Schema.Type<typeof DocumentBlock> {}

/**
 * The `type` values of the blocks this module models; `OtherBlock` takes
 * every other type.
 *
 * @since 0.0.0
 */
export const knownBlockTypes: ReadonlySet<string> = new Set([
  "text",
  "thinking",
  "redacted_thinking",
  "tool_use",
  "tool_result",
  "image",
  "document"
])

/**
 * Any block whose `type` is not one of `knownBlockTypes` (server tool blocks,
 * search results, blocks added by later API versions). It is kept as data.
 *
 * @since 0.0.0
 */
export const OtherBlock = Schema.Struct({
  type: OtherTag(knownBlockTypes, "block")
})
/** @since 0.0.0 */
export interface OtherBlock extends Schema.Schema.Type<typeof OtherBlock> {}

/**
 * Narrows a block to the known kinds (`OtherBlock`'s open `type` defeats
 * narrowing on `type` until this guard runs).
 *
 * @since 0.0.0
 */
export const isKnownBlock = (block: ContentBlock): block is KnownContentBlock => knownBlockTypes.has(block.type)

/**
 * What a `tool_result` may contain besides a plain string.
 *
 * @since 0.0.0
 */
export const ToolResultContentBlock = Schema.Union(TextBlock, ImageBlock, DocumentBlock, OtherBlock)
/** @since 0.0.0 */
export type ToolResultContentBlock = Schema.Schema.Type<typeof ToolResultContentBlock>

/** @since 0.0.0 */
export const ToolResultBlock = Schema.Struct({
  type: Schema.Literal("tool_result"),
  tool_use_id: Schema.String,
  content: Schema.optional(Schema.Union(Schema.String, Schema.Array(ToolResultContentBlock))),
  is_error: Schema.optional(Schema.Boolean),
  cache_control: Schema.optional(Schema.NullOr(CacheControl))
})
/** @since 0.0.0 */
export interface ToolResultBlock extends Schema.Schema.Type<typeof ToolResultBlock> {}

/** @since 0.0.0 */
export const ContentBlock = Schema.Union(
  TextBlock,
  ThinkingBlock,
  RedactedThinkingBlock,
  ToolUseBlock,
  ToolResultBlock,
  ImageBlock,
  DocumentBlock,
  OtherBlock
)
/** @since 0.0.0 */
export type ContentBlock = Schema.Schema.Type<typeof ContentBlock>

/** @since 0.0.0 */
export type KnownContentBlock =
  | TextBlock
  | ThinkingBlock
  | RedactedThinkingBlock
  | ToolUseBlock
  | ToolResultBlock
  | ImageBlock
  | DocumentBlock

// ---------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------

/**
 * The stop reasons the API documents. Fields that carry a stop reason accept
 * any string, so a new reason does not break decoding.
 *
 * @since 0.0.0
 */
export const StopReason = Schema.Literal(
  "end_turn",
  "max_tokens",
  "stop_sequence",
  "tool_use",
  "pause_turn",
  "refusal",
  "model_context_window_exceeded"
)
/** @since 0.0.0 */
export type StopReason = Schema.Schema.Type<typeof StopReason>

const OptionalCount = Schema.optional(Schema.NullOr(Schema.Number))

/** @since 0.0.0 */
export const ServerToolUsage = Schema.Struct({
  web_search_requests: OptionalCount,
  web_fetch_requests: OptionalCount
})
/** @since 0.0.0 */
export interface ServerToolUsage extends Schema.Schema.Type<typeof ServerToolUsage> {}

/** @since 0.0.0 */
export const CacheCreationUsage = Schema.Struct({
  ephemeral_5m_input_tokens: OptionalCount,
  ephemeral_1h_input_tokens: OptionalCount
})
/** @since 0.0.0 */
export interface CacheCreationUsage extends Schema.Schema.Type<typeof CacheCreationUsage> {}

/** @since 0.0.0 */
export const Usage = Schema.Struct({
  input_tokens: Schema.Number,
  output_tokens: Schema.Number,
  cache_creation_input_tokens: OptionalCount,
  cache_read_input_tokens: OptionalCount,
  cache_creation: Schema.optional(Schema.NullOr(CacheCreationUsage)),
  server_tool_use: Schema.optional(Schema.NullOr(ServerToolUsage)),
  service_tier: Schema.optional(Schema.NullOr(Schema.String))
})
/** @since 0.0.0 */
export interface Usage extends Schema.Schema.Type<typeof Usage> {}

/**
 * The usage carried by `message_delta`: cumulative counts, where only the
 * output count is always present.
 *
 * @since 0.0.0
 */
export const MessageDeltaUsage = Schema.Struct({
  output_tokens: Schema.Number,
  input_tokens: OptionalCount,
  cache_creation_input_tokens: OptionalCount,
  cache_read_input_tokens: OptionalCount,
  server_tool_use: Schema.optional(Schema.NullOr(ServerToolUsage))
})
/** @since 0.0.0 */
export interface MessageDeltaUsage extends Schema.Schema.Type<typeof MessageDeltaUsage> {}

/**
 * The assistant message the API returns (and announces in `message_start`).
 *
 * @since 0.0.0
 */
export const Message = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("message"),
  role: Schema.Literal("assistant"),
  model: Schema.String,
  content: Schema.Array(ContentBlock),
  stop_reason: Schema.NullOr(Schema.String),
  stop_sequence: Schema.NullOr(Schema.String),
  usage: Usage
})
/** @since 0.0.0 */
export interface Message extends Schema.Schema.Type<typeof Message> {}

/**
 * A message of the request history. Besides `user` and `assistant`, Claude
 * Code 2.1.x sends `system` messages (per-turn context such as the
 * environment block) inside `messages`.
 *
 * @since 0.0.0
 */
export const MessageParam = Schema.Struct({
  role: Schema.Literal("user", "assistant", "system"),
  content: Schema.Union(Schema.String, Schema.Array(ContentBlock))
})
/** @since 0.0.0 */
export interface MessageParam extends Schema.Schema.Type<typeof MessageParam> {}

/**
 * A tool offered to the model. Client tools have `input_schema`; server tools
 * (web search and the like) have a versioned `type` instead.
 *
 * @since 0.0.0
 */
export const Tool = Schema.Struct({
  name: Schema.String,
  type: Schema.optional(Schema.String),
  description: Schema.optional(Schema.String),
  input_schema: Schema.optional(JsonObject),
  cache_control: Schema.optional(Schema.NullOr(CacheControl))
})
/** @since 0.0.0 */
export interface Tool extends Schema.Schema.Type<typeof Tool> {}

/** @since 0.0.0 */
export const ToolChoice = Schema.Union(
  Schema.Struct({
    type: Schema.Literal("auto", "any", "none"),
    disable_parallel_tool_use: Schema.optional(Schema.Boolean)
  }),
  Schema.Struct({
    type: Schema.Literal("tool"),
    name: Schema.String,
    disable_parallel_tool_use: Schema.optional(Schema.Boolean)
  })
)
/** @since 0.0.0 */
export type ToolChoice = Schema.Schema.Type<typeof ToolChoice>

/** @since 0.0.0 */
export const ThinkingConfig = Schema.Union(
  Schema.Struct({ type: Schema.Literal("enabled"), budget_tokens: Schema.Number }),
  Schema.Struct({ type: Schema.Literal("disabled", "adaptive") })
)
/** @since 0.0.0 */
export type ThinkingConfig = Schema.Schema.Type<typeof ThinkingConfig>

/** @since 0.0.0 */
export const RequestMetadata = Schema.Struct({
  user_id: Schema.optional(Schema.NullOr(Schema.String))
})
/** @since 0.0.0 */
export interface RequestMetadata extends Schema.Schema.Type<typeof RequestMetadata> {}

/**
 * The body of `POST /v1/messages`.
 *
 * @since 0.0.0
 */
export const MessagesRequest = Schema.Struct({
  model: Schema.String,
  messages: Schema.Array(MessageParam),
  max_tokens: Schema.Number,
  system: Schema.optional(Schema.Union(Schema.String, Schema.Array(TextBlock))),
  tools: Schema.optional(Schema.Array(Tool)),
  tool_choice: Schema.optional(ToolChoice),
  stream: Schema.optional(Schema.Boolean),
  thinking: Schema.optional(ThinkingConfig),
  metadata: Schema.optional(RequestMetadata),
  temperature: Schema.optional(Schema.Number),
  top_p: Schema.optional(Schema.Number),
  top_k: Schema.optional(Schema.Number),
  stop_sequences: Schema.optional(StringArray),
  service_tier: Schema.optional(Schema.String)
})
/** @since 0.0.0 */
export interface MessagesRequest extends Schema.Schema.Type<typeof MessagesRequest> {}

/**
 * The body of `POST /v1/messages/count_tokens`.
 *
 * @since 0.0.0
 */
export const CountTokensRequest = Schema.Struct({
  model: Schema.String,
  messages: Schema.Array(MessageParam),
  system: Schema.optional(Schema.Union(Schema.String, Schema.Array(TextBlock))),
  tools: Schema.optional(Schema.Array(Tool)),
  thinking: Schema.optional(ThinkingConfig)
})
/** @since 0.0.0 */
export interface CountTokensRequest extends Schema.Schema.Type<typeof CountTokensRequest> {}

// ---------------------------------------------------------------------------
// Stream events
// ---------------------------------------------------------------------------

/** @since 0.0.0 */
export const TextDelta = Schema.Struct({
  type: Schema.Literal("text_delta"),
  text: Schema.String
})
/** @since 0.0.0 */
export interface TextDelta extends Schema.Schema.Type<typeof TextDelta> {}

/** @since 0.0.0 */
export const InputJsonDelta = Schema.Struct({
  type: Schema.Literal("input_json_delta"),
  partial_json: Schema.String
})
/** @since 0.0.0 */
export interface InputJsonDelta extends Schema.Schema.Type<typeof InputJsonDelta> {}

/** @since 0.0.0 */
export const ThinkingDelta = Schema.Struct({
  type: Schema.Literal("thinking_delta"),
  thinking: Schema.String
})
/** @since 0.0.0 */
export interface ThinkingDelta extends Schema.Schema.Type<typeof ThinkingDelta> {}

/** @since 0.0.0 */
export const SignatureDelta = Schema.Struct({
  type: Schema.Literal("signature_delta"),
  signature: Schema.String
})
/** @since 0.0.0 */
export interface SignatureDelta extends Schema.Schema.Type<typeof SignatureDelta> {}

/** @since 0.0.0 */
export const CitationsDelta = Schema.Struct({
  type: Schema.Literal("citations_delta"),
  citation: Citation
})
/** @since 0.0.0 */
export interface CitationsDelta extends Schema.Schema.Type<typeof CitationsDelta> {}

/** @since 0.0.0 */
export const knownDeltaTypes: ReadonlySet<string> = new Set([
  "text_delta",
  "input_json_delta",
  "thinking_delta",
  "signature_delta",
  "citations_delta"
])

/**
 * Any delta whose `type` is not one of `knownDeltaTypes`.
 *
 * @since 0.0.0
 */
export const OtherDelta = Schema.Struct({
  type: OtherTag(knownDeltaTypes, "delta")
})
/** @since 0.0.0 */
export interface OtherDelta extends Schema.Schema.Type<typeof OtherDelta> {}

/**
 * Narrows a delta to the known kinds.
 *
 * @since 0.0.0
 */
export const isKnownDelta = (delta: ContentBlockDelta): delta is KnownDelta => knownDeltaTypes.has(delta.type)

/** @since 0.0.0 */
export type KnownDelta = TextDelta | InputJsonDelta | ThinkingDelta | SignatureDelta | CitationsDelta

/** @since 0.0.0 */
export const ContentBlockDelta = Schema.Union(
  TextDelta,
  InputJsonDelta,
  ThinkingDelta,
  SignatureDelta,
  CitationsDelta,
  OtherDelta
)
/** @since 0.0.0 */
export type ContentBlockDelta = Schema.Schema.Type<typeof ContentBlockDelta>

/** @since 0.0.0 */
export const MessageStartEvent = Schema.Struct({
  type: Schema.Literal("message_start"),
  message: Message
})
/** @since 0.0.0 */
export interface MessageStartEvent extends Schema.Schema.Type<typeof MessageStartEvent> {}

/** @since 0.0.0 */
export const ContentBlockStartEvent = Schema.Struct({
  type: Schema.Literal("content_block_start"),
  index: Schema.Number,
  content_block: ContentBlock
})
/** @since 0.0.0 */
export interface ContentBlockStartEvent extends Schema.Schema.Type<typeof ContentBlockStartEvent> {}

/** @since 0.0.0 */
export const ContentBlockDeltaEvent = Schema.Struct({
  type: Schema.Literal("content_block_delta"),
  index: Schema.Number,
  delta: ContentBlockDelta
})
/** @since 0.0.0 */
export interface ContentBlockDeltaEvent extends Schema.Schema.Type<typeof ContentBlockDeltaEvent> {}

/** @since 0.0.0 */
export const ContentBlockStopEvent = Schema.Struct({
  type: Schema.Literal("content_block_stop"),
  index: Schema.Number
})
/** @since 0.0.0 */
export interface ContentBlockStopEvent extends Schema.Schema.Type<typeof ContentBlockStopEvent> {}

/** @since 0.0.0 */
export const MessageDeltaEvent = Schema.Struct({
  type: Schema.Literal("message_delta"),
  delta: Schema.Struct({
    stop_reason: Schema.NullOr(Schema.String),
    stop_sequence: Schema.NullOr(Schema.String)
  }),
  usage: MessageDeltaUsage
})
/** @since 0.0.0 */
export interface MessageDeltaEvent extends Schema.Schema.Type<typeof MessageDeltaEvent> {}

/** @since 0.0.0 */
export const MessageStopEvent = Schema.Struct({
  type: Schema.Literal("message_stop")
})
/** @since 0.0.0 */
export interface MessageStopEvent extends Schema.Schema.Type<typeof MessageStopEvent> {}

/** @since 0.0.0 */
export const PingEvent = Schema.Struct({
  type: Schema.Literal("ping")
})
/** @since 0.0.0 */
export interface PingEvent extends Schema.Schema.Type<typeof PingEvent> {}

/**
 * The `error` object of an error event or of an HTTP error response body
 * (`overloaded_error`, `api_error`, `invalid_request_error`, …).
 *
 * @since 0.0.0
 */
export const ApiError = Schema.Struct({
  type: Schema.String,
  message: Schema.String
})
/** @since 0.0.0 */
export interface ApiError extends Schema.Schema.Type<typeof ApiError> {}

/**
 * An error event in a stream. The same shape is the JSON body of an HTTP
 * error response.
 *
 * @since 0.0.0
 */
export const ErrorEvent = Schema.Struct({
  type: Schema.Literal("error"),
  error: ApiError
})
/** @since 0.0.0 */
export interface ErrorEvent extends Schema.Schema.Type<typeof ErrorEvent> {}

/** @since 0.0.0 */
export const MessageStreamEvent = Schema.Union(
  MessageStartEvent,
  ContentBlockStartEvent,
  ContentBlockDeltaEvent,
  ContentBlockStopEvent,
  MessageDeltaEvent,
  MessageStopEvent,
  PingEvent,
  ErrorEvent
)
/** @since 0.0.0 */
export type MessageStreamEvent = Schema.Schema.Type<typeof MessageStreamEvent>
