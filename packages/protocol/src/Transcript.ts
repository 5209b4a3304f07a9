/**
 * Entries of Claude Code's session transcripts
 * (`<config>/projects/<sanitized cwd>/<sessionId>.jsonl`).
 *
 * Conversation entries form a chain through `uuid`/`parentUuid`; metadata
 * entries stand outside it and the last one of each kind wins. The CLI writes
 * many bookkeeping entries (request shapes, latches) that a host does not
 * need: they decode as `Unknown` and are kept as data.
 */
import * as Schema from "effect/Schema"
import * as Anthropic from "./Anthropic.js"
import * as Lenient from "./Lenient.js"
import { JsonObject } from "./Json.js"

const optional = Schema.optional

/** Fields every conversation entry carries. */
const chain = {
  uuid: Schema.String,
  parentUuid: Schema.NullOr(Schema.String),
  isSidechain: Schema.Boolean,
  sessionId: Schema.String,
  timestamp: Schema.String,
  /** Set after compaction: the parent the chain had before the boundary cut it. */
  logicalParentUuid: optional(Schema.NullOr(Schema.String)),
  cwd: optional(Schema.String),
  version: optional(Schema.String),
  gitBranch: optional(Schema.String),
  userType: optional(Schema.String),
  agentId: optional(Schema.String)
} as const

export const UserEntry = Schema.Struct({
  type: Schema.Literal("user"),
  ...chain,
  message: Anthropic.MessageParam,
  isMeta: optional(Schema.Boolean),
  isCompactSummary: optional(Schema.Boolean),
  toolUseResult: optional(Schema.Unknown),
  promptId: optional(Schema.String),
  permissionMode: optional(Schema.String)
})
export interface UserEntry extends Schema.Schema.Type<typeof UserEntry> {}

export const AssistantEntry = Schema.Struct({
  type: Schema.Literal("assistant"),
  ...chain,
  message: Anthropic.Message,
  requestId: optional(Schema.String),
  isApiErrorMessage: optional(Schema.Boolean)
})
export interface AssistantEntry extends Schema.Schema.Type<typeof AssistantEntry> {}

export const AttachmentEntry = Schema.Struct({
  type: Schema.Literal("attachment"),
  ...chain,
  attachment: Schema.Struct({ type: Schema.String })
})
export interface AttachmentEntry extends Schema.Schema.Type<typeof AttachmentEntry> {}

export const CompactMetadata = Schema.Struct({
  trigger: Schema.String,
  preTokens: Schema.Number,
  postTokens: optional(Schema.Number)
})
export interface CompactMetadata extends Schema.Schema.Type<typeof CompactMetadata> {}

/** System entries: `compact_boundary`, informational notes, API errors and more. */
export const SystemEntry = Schema.Struct({
  type: Schema.Literal("system"),
  ...chain,
  subtype: optional(Schema.String),
  content: optional(Schema.String),
  level: optional(Schema.String),
  compactMetadata: optional(CompactMetadata)
})
export interface SystemEntry extends Schema.Schema.Type<typeof SystemEntry> {}

export type ChainEntry = UserEntry | AssistantEntry | AttachmentEntry | SystemEntry

// ---------------------------------------------------------------------------
// Metadata (last one wins)
// ---------------------------------------------------------------------------

const meta = <const Type extends string, Fields extends Schema.Struct.Fields>(type: Type, fields: Fields) =>
  Schema.Struct({ type: Schema.Literal(type), sessionId: optional(Schema.String), ...fields })

export const CustomTitle = meta("custom-title", { customTitle: Schema.String })
export interface CustomTitle extends Schema.Schema.Type<typeof CustomTitle> {}

export const AiTitle = meta("ai-title", { aiTitle: Schema.String })
export interface AiTitle extends Schema.Schema.Type<typeof AiTitle> {}

/** The last prompt, and the leaf a resume continues from. */
export const LastPrompt = meta("last-prompt", { lastPrompt: Schema.String, leafUuid: optional(Schema.String) })
export interface LastPrompt extends Schema.Schema.Type<typeof LastPrompt> {}

export const Mode = meta("mode", { mode: Schema.String })
export interface Mode extends Schema.Schema.Type<typeof Mode> {}

export const AgentName = meta("agent-name", { agentName: Schema.String })
export interface AgentName extends Schema.Schema.Type<typeof AgentName> {}

export const Tag = meta("tag", { tag: Schema.String })
export interface Tag extends Schema.Schema.Type<typeof Tag> {}

export const QueueOperation = meta("queue-operation", {
  operation: Schema.String,
  timestamp: Schema.String,
  content: optional(Schema.Unknown)
})
export interface QueueOperation extends Schema.Schema.Type<typeof QueueOperation> {}

export const CostState = meta("cost-state", {
  totalCostUSD: Schema.Number,
  modelUsage: optional(Schema.Record({ key: Schema.String, value: JsonObject }))
})
export interface CostState extends Schema.Schema.Type<typeof CostState> {}

/** The summary entry of older releases' compaction. */
export const Summary = meta("summary", { summary: Schema.String, leafUuid: Schema.String })
export interface Summary extends Schema.Schema.Type<typeof Summary> {}

export const FileHistorySnapshot = meta("file-history-snapshot", { messageId: Schema.String, snapshot: JsonObject })
export interface FileHistorySnapshot extends Schema.Schema.Type<typeof FileHistorySnapshot> {}

export type MetadataEntry =
  | CustomTitle
  | AiTitle
  | LastPrompt
  | Mode
  | AgentName
  | Tag
  | QueueOperation
  | CostState
  | Summary
  | FileHistorySnapshot

export type Entry = ChainEntry | MetadataEntry

export const decoder: Lenient.Decoder<Entry> = Lenient.make<Entry>({
  user: Lenient.schema(UserEntry),
  assistant: Lenient.schema(AssistantEntry),
  attachment: Lenient.schema(AttachmentEntry),
  system: Lenient.schema(SystemEntry),
  "custom-title": Lenient.schema(CustomTitle),
  "ai-title": Lenient.schema(AiTitle),
  "last-prompt": Lenient.schema(LastPrompt),
  mode: Lenient.schema(Mode),
  "agent-name": Lenient.schema(AgentName),
  tag: Lenient.schema(Tag),
  "queue-operation": Lenient.schema(QueueOperation),
  "cost-state": Lenient.schema(CostState),
  summary: Lenient.schema(Summary),
  "file-history-snapshot": Lenient.schema(FileHistorySnapshot)
})

export const isChainEntry = (entry: Entry): entry is ChainEntry =>
  entry.type === "user" || entry.type === "assistant" || entry.type === "attachment" || entry.type === "system"

export const isCompactBoundary = (entry: Entry): entry is SystemEntry =>
  entry.type === "system" && entry.subtype === "compact_boundary"
