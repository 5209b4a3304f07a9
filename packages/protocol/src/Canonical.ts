/**
 * Canonical, opencode-style events and message parts that `@skein/serve`
 * emits over SSE. Every event is an envelope `{ type, properties }`.
 *
 * The schemas do no transformation (Encoded == Type), so an event encodes to
 * exactly the JSON a client receives. Structs accept and drop excess fields,
 * so a client built against these schemas keeps working when skein adds a
 * field.
 *
 * @since 0.0.0
 */
import { Schema } from "effect"

// ---------------------------------------------------------------------------
// Shared shapes
// ---------------------------------------------------------------------------

/** Free-form JSON object (tool input, metadata). */
export const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })
export type JsonObject = typeof JsonObject.Type

export const Tokens = Schema.Struct({
  total: Schema.optional(Schema.Number),
  input: Schema.Number,
  output: Schema.Number,
  reasoning: Schema.Number,
  cache: Schema.Struct({ read: Schema.Number, write: Schema.Number })
}).annotations({ identifier: "Tokens" })
export type Tokens = typeof Tokens.Type

/**
 * A named error, as opencode reports them (`{ name, data }`), e.g.
 * `APIError`, `MessageAbortedError`, `UnknownError`. `data.message` is the
 * human-readable text where there is one.
 */
export const ErrorInfo = Schema.Struct({
  name: Schema.String,
  data: Schema.Struct({ message: Schema.optional(Schema.String) }, JsonObject)
}).annotations({ identifier: "ErrorInfo" })
export type ErrorInfo = typeof ErrorInfo.Type

/** Token/call counters the CLI reports for a background task. */
export const TaskUsage = Schema.Struct({
  total_tokens: Schema.Number,
  tool_uses: Schema.Number,
  duration_ms: Schema.Number
}).annotations({ identifier: "TaskUsage" })
export type TaskUsage = typeof TaskUsage.Type

/** Points a permission or question at the tool call that raised it. */
export const ToolRef = Schema.Struct({ messageID: Schema.String, callID: Schema.String })
export type ToolRef = typeof ToolRef.Type

// ---------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------

export const ModelRef = Schema.Struct({ providerID: Schema.String, modelID: Schema.String })
export type ModelRef = typeof ModelRef.Type

export const SessionInfo = Schema.Struct({
  id: Schema.String,
  title: Schema.String,
  directory: Schema.String,
  projectID: Schema.optional(Schema.String),
  parentID: Schema.optional(Schema.String),
  version: Schema.optional(Schema.String),
  time: Schema.Struct({
    created: Schema.Number,
    updated: Schema.Number,
    compacting: Schema.optional(Schema.Number)
  }),
  /** skein: the model the CLI reported last (`init`). */
  model: Schema.optional(ModelRef),
  /** skein: the CLI's permission mode (`init`, `status`). */
  permissionMode: Schema.optional(Schema.String)
}).annotations({ identifier: "SessionInfo" })
export type SessionInfo = typeof SessionInfo.Type

export const SessionStatus = Schema.Union(
  Schema.Struct({ type: Schema.Literal("busy") }),
  Schema.Struct({ type: Schema.Literal("idle") }),
  Schema.Struct({
    type: Schema.Literal("retry"),
    attempt: Schema.Number,
    message: Schema.String,
    /** Epoch ms of the next attempt. */
    next: Schema.Number
  })
).annotations({ identifier: "SessionStatus" })
export type SessionStatus = typeof SessionStatus.Type

// ---------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------


export const UserMessage = Schema.Struct({
  id: Schema.String,
  sessionID: Schema.String,
  role: Schema.Literal("user"),
  time: Schema.Struct({ created: Schema.Number }),
  agent: Schema.optional(Schema.String),
  model: Schema.optional(ModelRef),
  system: Schema.optional(Schema.String)
}).annotations({ identifier: "UserMessage" })
export type UserMessage = typeof UserMessage.Type

export const AssistantMessage = Schema.Struct({
  id: Schema.String,
  sessionID: Schema.String,
  role: Schema.Literal("assistant"),
  time: Schema.Struct({ created: Schema.Number, completed: Schema.optional(Schema.Number) }),
  /** The user message this one answers. */
  parentID: Schema.String,
  modelID: Schema.String,
  providerID: Schema.String,
  mode: Schema.optional(Schema.String),
  agent: Schema.optional(Schema.String),
  path: Schema.optional(Schema.Struct({ cwd: Schema.String, root: Schema.String })),
  summary: Schema.optional(Schema.Boolean),
  cost: Schema.Number,
  tokens: Tokens,
  error: Schema.optional(ErrorInfo),
  /** Stop reason of the last step (`end_turn`, `tool_use`, …). */
  finish: Schema.optional(Schema.String)
}).annotations({ identifier: "AssistantMessage" })
export type AssistantMessage = typeof AssistantMessage.Type

export const MessageInfo = Schema.Union(UserMessage, AssistantMessage).annotations({ identifier: "MessageInfo" })
export type MessageInfo = typeof MessageInfo.Type

// ---------------------------------------------------------------------------
// Parts
// ---------------------------------------------------------------------------

const partBase = {
  id: Schema.String,
  sessionID: Schema.String,
  messageID: Schema.String
} as const

const partTime = Schema.Struct({ start: Schema.Number, end: Schema.optional(Schema.Number) })

export const TextPart = Schema.Struct({
  ...partBase,
  type: Schema.Literal("text"),
  text: Schema.String,
  synthetic: Schema.optional(Schema.Boolean),
  ignored: Schema.optional(Schema.Boolean),
  time: Schema.optional(partTime),
  metadata: Schema.optional(JsonObject)
}).annotations({ identifier: "TextPart" })
export type TextPart = typeof TextPart.Type

export const ReasoningPart = Schema.Struct({
  ...partBase,
  type: Schema.Literal("reasoning"),
  text: Schema.String,
  /** The model returned `redacted_thinking`: the text is empty by design. */
  redacted: Schema.optional(Schema.Boolean),
  time: partTime,
  metadata: Schema.optional(JsonObject)
}).annotations({ identifier: "ReasoningPart" })
export type ReasoningPart = typeof ReasoningPart.Type

export const ToolStatePending = Schema.Struct({
  status: Schema.Literal("pending"),
  input: JsonObject,
  /** Tool input JSON as streamed so far. */
  raw: Schema.optional(Schema.String)
}).annotations({ identifier: "ToolStatePending" })
export type ToolStatePending = typeof ToolStatePending.Type

export const ToolStateRunning = Schema.Struct({
  status: Schema.Literal("running"),
  input: JsonObject,
  title: Schema.optional(Schema.String),
  metadata: Schema.optional(JsonObject),
  time: Schema.Struct({ start: Schema.Number })
}).annotations({ identifier: "ToolStateRunning" })
export type ToolStateRunning = typeof ToolStateRunning.Type

export const ToolStateCompleted = Schema.Struct({
  status: Schema.Literal("completed"),
  input: JsonObject,
  output: Schema.String,
  title: Schema.String,
  metadata: JsonObject,
  time: Schema.Struct({ start: Schema.Number, end: Schema.Number, compacted: Schema.optional(Schema.Number) })
}).annotations({ identifier: "ToolStateCompleted" })
export type ToolStateCompleted = typeof ToolStateCompleted.Type

export const ToolStateError = Schema.Struct({
  status: Schema.Literal("error"),
  input: JsonObject,
  error: Schema.String,
  metadata: Schema.optional(JsonObject),
  time: Schema.Struct({ start: Schema.Number, end: Schema.Number })
}).annotations({ identifier: "ToolStateError" })
export type ToolStateError = typeof ToolStateError.Type

/** pending → running → completed | error; each state carries what it knows by then. */
export const ToolState = Schema.Union(ToolStatePending, ToolStateRunning, ToolStateCompleted, ToolStateError)
  .annotations({ identifier: "ToolState" })
export type ToolState = typeof ToolState.Type

export const ToolPart = Schema.Struct({
  ...partBase,
  type: Schema.Literal("tool"),
  /** The model's `tool_use` id. */
  callID: Schema.String,
  tool: Schema.String,
  state: ToolState,
  metadata: Schema.optional(JsonObject)
}).annotations({ identifier: "ToolPart" })
export type ToolPart = typeof ToolPart.Type

export const StepStartPart = Schema.Struct({
  ...partBase,
  type: Schema.Literal("step-start"),
  snapshot: Schema.optional(Schema.String)
}).annotations({ identifier: "StepStartPart" })
export type StepStartPart = typeof StepStartPart.Type

export const StepFinishPart = Schema.Struct({
  ...partBase,
  type: Schema.Literal("step-finish"),
  reason: Schema.String,
  snapshot: Schema.optional(Schema.String),
  cost: Schema.Number,
  tokens: Tokens
}).annotations({ identifier: "StepFinishPart" })
export type StepFinishPart = typeof StepFinishPart.Type

export const CompactionPart = Schema.Struct({
  ...partBase,
  type: Schema.Literal("compaction"),
  auto: Schema.Boolean,
  overflow: Schema.optional(Schema.Boolean)
}).annotations({ identifier: "CompactionPart" })
export type CompactionPart = typeof CompactionPart.Type

export const RetryPart = Schema.Struct({
  ...partBase,
  type: Schema.Literal("retry"),
  attempt: Schema.Number,
  error: ErrorInfo,
  time: Schema.Struct({ created: Schema.Number })
}).annotations({ identifier: "RetryPart" })
export type RetryPart = typeof RetryPart.Type

export const SubtaskPart = Schema.Struct({
  ...partBase,
  type: Schema.Literal("subtask"),
  prompt: Schema.String,
  description: Schema.String,
  agent: Schema.String,
  model: Schema.optional(ModelRef),
  command: Schema.optional(Schema.String)
}).annotations({ identifier: "SubtaskPart" })
export type SubtaskPart = typeof SubtaskPart.Type

/** A file the user attached: an image, a PDF or a text document, its content in a `data:` URL. */
export const FilePart = Schema.Struct({
  ...partBase,
  type: Schema.Literal("file"),
  mime: Schema.String,
  url: Schema.String,
  filename: Schema.optional(Schema.String)
}).annotations({ identifier: "FilePart" })
export type FilePart = typeof FilePart.Type

export const Part = Schema.Union(
  TextPart,
  FilePart,
  ReasoningPart,
  ToolPart,
  StepStartPart,
  StepFinishPart,
  CompactionPart,
  RetryPart,
  SubtaskPart
).annotations({ identifier: "Part" })
export type Part = typeof Part.Type

// ---------------------------------------------------------------------------
// Permissions and questions
// ---------------------------------------------------------------------------

export const PermissionRequest = Schema.Struct({
  id: Schema.String,
  sessionID: Schema.String,
  /** What is asked for: the tool name (`Bash`, `Edit`, …). */
  permission: Schema.String,
  patterns: Schema.Array(Schema.String),
  metadata: JsonObject,
  /** Patterns an "always" reply would allow from now on. */
  always: Schema.Array(Schema.String),
  tool: Schema.optional(ToolRef)
}).annotations({ identifier: "PermissionRequest" })
export type PermissionRequest = typeof PermissionRequest.Type

export const PermissionReply = Schema.Literal("once", "always", "reject")
export type PermissionReply = typeof PermissionReply.Type

export const QuestionOption = Schema.Struct({ label: Schema.String, description: Schema.String })
export type QuestionOption = typeof QuestionOption.Type

export const QuestionInfo = Schema.Struct({
  question: Schema.String,
  header: Schema.String,
  options: Schema.Array(QuestionOption),
  multiple: Schema.optional(Schema.Boolean)
}).annotations({ identifier: "QuestionInfo" })
export type QuestionInfo = typeof QuestionInfo.Type

export const QuestionRequest = Schema.Struct({
  id: Schema.String,
  sessionID: Schema.String,
  questions: Schema.Array(QuestionInfo),
  tool: Schema.optional(ToolRef)
}).annotations({ identifier: "QuestionRequest" })
export type QuestionRequest = typeof QuestionRequest.Type

// ---------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------

/** Any envelope, known type or not: for readers that pass events through. */
export const Envelope = Schema.Struct({
  type: Schema.String,
  properties: JsonObject
}).annotations({ identifier: "Envelope" })
export type Envelope = typeof Envelope.Type

const define = <const T extends string, P extends Schema.Schema.Any>(type: T, properties: P) =>
  Schema.Struct({ type: Schema.Literal(type), properties }).annotations({ identifier: type })

const sessionID = { sessionID: Schema.String } as const

export const SessionCreated = define("session.created", Schema.Struct({ info: SessionInfo }))
export const SessionUpdated = define("session.updated", Schema.Struct({ info: SessionInfo }))
/** The session left the listing (opencode's clients drop it from theirs); its transcript is archived, not erased. */
export const SessionDeleted = define("session.deleted", Schema.Struct({ info: SessionInfo }))
export const SessionStatusEvent = define("session.status", Schema.Struct({ ...sessionID, status: SessionStatus }))
export const SessionIdle = define("session.idle", Schema.Struct(sessionID))
export const SessionError = define(
  "session.error",
  Schema.Struct({ sessionID: Schema.optional(Schema.String), error: Schema.optional(ErrorInfo) })
)

export const MessageUpdated = define("message.updated", Schema.Struct({ ...sessionID, info: MessageInfo }))
export const MessageRemoved = define("message.removed", Schema.Struct({ ...sessionID, messageID: Schema.String }))
export const MessagePartUpdated = define(
  "message.part.updated",
  Schema.Struct({ ...sessionID, part: Part, time: Schema.optional(Schema.Number) })
)
export const MessagePartDelta = define(
  "message.part.delta",
  Schema.Struct({
    ...sessionID,
    messageID: Schema.String,
    partID: Schema.String,
    /** The part field the delta appends to: `text`, or `input` for tool input JSON. */
    field: Schema.String,
    delta: Schema.String
  })
)

export const PermissionAsked = define("permission.asked", PermissionRequest)
export const PermissionReplied = define(
  "permission.replied",
  Schema.Struct({ ...sessionID, requestID: Schema.String, reply: PermissionReply })
)
export const QuestionAsked = define("question.asked", QuestionRequest)
export const QuestionReplied = define(
  "question.replied",
  Schema.Struct({
    ...sessionID,
    requestID: Schema.String,
    /** One list of chosen labels per question, in order. */
    answers: Schema.Array(Schema.Array(Schema.String))
  })
)

export const TaskStatus = Schema.Literal("completed", "failed", "stopped")
export type TaskStatus = typeof TaskStatus.Type

export const TaskStarted = define(
  "task.started",
  Schema.Struct({
    ...sessionID,
    taskID: Schema.String,
    toolUseID: Schema.optional(Schema.String),
    description: Schema.String,
    taskType: Schema.optional(Schema.String),
    workflowName: Schema.optional(Schema.String),
    prompt: Schema.optional(Schema.String)
  })
)
export const TaskProgress = define(
  "task.progress",
  Schema.Struct({
    ...sessionID,
    taskID: Schema.String,
    description: Schema.String,
    usage: TaskUsage,
    lastToolName: Schema.optional(Schema.String),
    summary: Schema.optional(Schema.String),
    workflowProgress: Schema.optional(Schema.Array(Schema.Unknown))
  })
)
export const TaskCompleted = define(
  "task.completed",
  Schema.Struct({
    ...sessionID,
    taskID: Schema.String,
    toolUseID: Schema.optional(Schema.String),
    status: TaskStatus,
    summary: Schema.String,
    outputFile: Schema.String,
    usage: Schema.optional(TaskUsage)
  })
)
export const ToolProgress = define(
  "tool.progress",
  Schema.Struct({
    ...sessionID,
    toolUseID: Schema.String,
    toolName: Schema.optional(Schema.String),
    parentToolUseID: Schema.optional(Schema.NullOr(Schema.String)),
    elapsedTimeSeconds: Schema.optional(Schema.Number),
    data: Schema.optional(Schema.Unknown)
  })
)
export const MessageAttachment = define(
  "message.attachment",
  Schema.Struct({
    ...sessionID,
    messageID: Schema.optional(Schema.String),
    attachmentType: Schema.optional(Schema.String),
    attachment: Schema.Unknown
  })
)
export const SessionHookSummary = define(
  "session.hook_summary",
  Schema.Struct({
    ...sessionID,
    hookLabel: Schema.optional(Schema.String),
    hookCount: Schema.optional(Schema.Number),
    hookErrors: Schema.optional(Schema.Array(Schema.Unknown)),
    preventedContinuation: Schema.optional(Schema.Boolean),
    totalDurationMs: Schema.optional(Schema.Number)
  })
)
export const SessionMetrics = define(
  "session.metrics",
  Schema.Struct({
    ...sessionID,
    durationMs: Schema.optional(Schema.Number),
    durationApiMs: Schema.optional(Schema.Number),
    numTurns: Schema.optional(Schema.Number),
    cost: Schema.optional(Schema.Number),
    tokens: Schema.optional(Tokens)
  })
)

export const SessionCompacted = define("session.compacted", Schema.Struct(sessionID))
export const QuestionRejected = define(
  "question.rejected",
  Schema.Struct({ ...sessionID, requestID: Schema.String })
)

/** A note the CLI showed the user (`informational` and the like). */
const notice = {
  ...sessionID,
  message: Schema.String,
  level: Schema.optional(Schema.String),
  /** The CLI's subtype the notice came from. */
  source: Schema.optional(Schema.String),
  toolUseID: Schema.optional(Schema.String)
} as const
export const SessionInfoEvent = define("session.info", Schema.Struct(notice))
export const SessionWarning = define("session.warning", Schema.Struct(notice))

/** One hook's run: started, progress or response, as the CLI reports it. */
export const SessionHookProgress = define(
  "session.hook_progress",
  Schema.Struct({
    ...sessionID,
    hookID: Schema.String,
    hookName: Schema.String,
    hookEvent: Schema.String,
    phase: Schema.Literal("started", "progress", "response"),
    stdout: Schema.optional(Schema.String),
    stderr: Schema.optional(Schema.String),
    output: Schema.optional(Schema.String),
    exitCode: Schema.optional(Schema.Number),
    outcome: Schema.optional(Schema.String)
  })
)

/**
 * A CLI message with no canonical meaning (an unknown type or subtype, a
 * bookkeeping message, a diagnostic), kept whole so that nothing is dropped
 * without a trace.
 */
export const SessionCliEvent = define(
  "session.cli_event",
  Schema.Struct({
    ...sessionID,
    /** `message` (known and passed through), `unknown`, or a diagnostic tag. */
    kind: Schema.String,
    cliType: Schema.optional(Schema.String),
    cliSubtype: Schema.optional(Schema.String),
    /** The message as the CLI wrote it, or the raw line of a diagnostic. */
    data: Schema.Unknown,
    issue: Schema.optional(Schema.String)
  })
)

/** The flat events of the pre-canonical wire (`legacy` mode), carrying the CLI's message as is. */
const legacy = <const T extends string>(type: T) =>
  define(type, Schema.Struct({ ...sessionID, message: Schema.Unknown }))
export const LegacyMessage = legacy("session.message")
export const LegacyStreamEvent = legacy("session.stream_event")
export const LegacyControlRequest = legacy("session.control_request")
export const LegacyResult = legacy("session.result")

/** Every event serve emits. An unknown `type` fails to decode. */
export const CanonicalEvent = Schema.Union(
  SessionCreated,
  SessionUpdated,
  SessionDeleted,
  SessionStatusEvent,
  SessionIdle,
  SessionError,
  MessageUpdated,
  MessageRemoved,
  MessagePartUpdated,
  MessagePartDelta,
  PermissionAsked,
  PermissionReplied,
  QuestionAsked,
  QuestionReplied,
  TaskStarted,
  TaskProgress,
  TaskCompleted,
  ToolProgress,
  MessageAttachment,
  SessionHookSummary,
  SessionMetrics,
  SessionCompacted,
  QuestionRejected,
  SessionInfoEvent,
  SessionWarning,
  SessionHookProgress,
  SessionCliEvent,
  LegacyMessage,
  LegacyStreamEvent,
  LegacyControlRequest,
  LegacyResult
).annotations({ identifier: "CanonicalEvent" })

/** The flat event types only `legacy` mode writes. */
export const legacyEventTypes: ReadonlySet<string> = new Set([
  "session.message",
  "session.stream_event",
  "session.control_request",
  "session.result"
])
export type CanonicalEvent = typeof CanonicalEvent.Type

export type EventType = CanonicalEvent["type"]

export type PropertiesOf<T extends EventType> = Extract<CanonicalEvent, { readonly type: T }>["properties"]

/** All event type names, in the order of {@link CanonicalEvent}. */
export const eventTypes: ReadonlyArray<EventType> = CanonicalEvent.members.map((member) => member.fields.type.literals[0])

/**
 * Builds an event: `Canonical.event("session.idle", { sessionID })`.
 * The properties are checked against the event type at compile time.
 */
export const event = <const T extends EventType>(
  type: T,
  properties: PropertiesOf<T>
): { readonly type: T; readonly properties: PropertiesOf<T> } => ({ type, properties })

export const decodeEvent = Schema.decodeUnknown(CanonicalEvent)
export const decodeEventEither = Schema.decodeUnknownEither(CanonicalEvent)
export const encodeEvent = Schema.encode(CanonicalEvent)
export const decodePart = Schema.decodeUnknown(Part)
