/**
 * The translator's state, and the small helpers every concern shares. The
 * state is immutable: each step returns a new one, copying only what it
 * touched (a message has few blocks, so its maps stay small).
 */
import type { Anthropic, Canonical } from "@skein/protocol"
import * as AppendOnlySet from "./appendOnlySet.js"
import * as Ids from "../Ids.js"

/**
 * What the host knows of the session that the CLI never prints: its clients
 * replace their session with each `session.updated`, so without it a title
 * would go blank and the creation date would be 1970.
 */
export interface HostInfo {
  readonly title?: string | undefined
  /** Epoch ms. Unlike `createdAt` it leaves the `ses_` id as it is. */
  readonly created?: number | undefined
  readonly projectID?: string | undefined
  readonly parentID?: string | undefined
  readonly version?: string | undefined
}

export interface Options {
  /** The CLI's session UUID; the `ses_` id is derived from it. */
  readonly cliSessionId: string
  /** When the session was created, if known (epoch ms): makes `ses_` ids sort by creation. */
  readonly createdAt?: number | undefined
  /** Dual-write the old flat events (`session.message`, …) beside the canonical ones. */
  readonly legacy?: boolean | undefined
  /** The working directory for assistant `path` (default: the `init` message's `cwd`). */
  readonly cwd?: string | undefined
  readonly host?: HostInfo | undefined
}

/** A prompt the host wrote, under the uuid the CLI keeps for its transcript entry. */
export interface Prompt {
  readonly uuid: string
  readonly content: string | ReadonlyArray<Anthropic.ContentBlock>
  /** When the host sent it (epoch ms). */
  readonly at: number
}

export type BlockKind = "text" | "reasoning" | "tool"

export interface Block {
  readonly index: number
  readonly kind: BlockKind
  readonly partID: string
  readonly start: number
  /** Text so far (text, reasoning) or raw input JSON so far (tool). */
  readonly text: string
  readonly redacted: boolean
  readonly callID: string
  readonly tool: string
  readonly closed: boolean
}

export interface StepUsage {
  readonly input: number
  readonly output: number
  readonly cacheRead: number
  readonly cacheWrite: number
}

/** An assistant message's info as `openAssistant` makes it: every field its final update copies is there. */
export type OpenedInfo = Canonical.AssistantMessage & {
  readonly mode: string
  readonly agent: string
  readonly path: { readonly cwd: string; readonly root: string }
}

/** One API message (one `message_start` … `message_stop`): one opencode assistant message and step. */
export interface OpenMessage {
  readonly apiId: string
  readonly key: number
  /** Hash seed of the message's identity: its parts' ids derive from it. */
  readonly seed: Ids.Seed
  readonly info: OpenedInfo
  /**
   * Its blocks in the order they opened (a block's key is its `index`). A
   * message has few blocks and every stream delta replaces one, so an array
   * copy is cheaper than a Map copy; see `blockAt` and `withBlock`.
   */
  readonly blocks: ReadonlyArray<Block>
  /** Seen through `stream_event`s: whole `assistant` messages only confirm it. */
  readonly streamed: boolean
  /** Index the next whole `assistant` block gets when the CLI does not say. */
  readonly nextIndex: number
  readonly usage: StepUsage
  readonly stopReason: string | null
  /** Timestamp of the message's first stamped record: its `time.created` once known. */
  readonly firstStamp: number | undefined
}

/** A tool part that ran (or runs) and waits for its `tool_result`. */
export interface OpenTool {
  readonly messageID: string
  readonly partID: string
  readonly tool: string
  readonly input: Canonical.JsonObject
  readonly start: number
}

export interface OpenRequest {
  readonly id: string
  readonly kind: "permission" | "question"
  readonly callID: string | undefined
}

export interface PendingRetry {
  readonly attempt: number
  readonly error: Canonical.ErrorInfo
  readonly created: number
}

/** A background task as the CLI has told of it: `task_updated` patches carry only what changed. */
export interface TaskSeen {
  readonly description: string
  readonly toolUseID: string | undefined
  readonly usage: Canonical.TaskUsage
  /** Its `task.completed` was given (by a terminal patch or the notification): it is given once. */
  readonly completed: boolean
}

export interface State {
  readonly options: Options
  readonly sessionID: string
  /** The CLI's clock: the timestamp of the last assistant message seen (ms). */
  readonly clock: number
  readonly userOrdinal: number
  readonly assistantOrdinal: number
  readonly message: OpenMessage | undefined
  /** Messages already finished, by API id: late whole `assistant` copies of them are ignored. */
  readonly finished: AppendOnlySet.AppendOnlySet<string>
  /** The newest user message: the `parentID` of the next assistant message. */
  readonly lastUserMessageID: string | undefined
  readonly tools: ReadonlyMap<string, OpenTool>
  readonly requests: ReadonlyMap<string, OpenRequest>
  readonly pendingRetries: ReadonlyArray<PendingRetry>
  readonly busy: boolean
  /** The turn's result said it was aborted (an interrupt the input did not report). */
  readonly aborted: boolean
  /**
   * An interrupt ended this exchange (the CLI's marker, or the turn's end says
   * so): an assistant message finished without a stop reason was aborted.
   * The next prompt clears it.
   */
  readonly interrupted: boolean
  readonly model: string | undefined
  readonly permissionMode: string | undefined
  readonly cwd: string | undefined
  readonly compacting: boolean
  /** A compaction boundary whose message waits for the summary's timestamp (see `systemMessages`). */
  readonly pendingCompaction: { readonly uuid: string; readonly auto: boolean } | undefined
  readonly requestOrdinal: number
  /** Prompts (user messages the CLI does not echo) since the last tick: they count in their own range. */
  readonly promptOrdinal: number
  /** Prompts the host sent while a turn ran: each shows at the idle that lets the CLI read it. */
  readonly queuedPrompts: ReadonlyArray<Prompt>
  /** A prompt showed and its turn has not ended: the CLI reads no other before its idle. */
  readonly promptAwaitsIdle: boolean
  readonly tasks: ReadonlyMap<string, TaskSeen>
}

/** Every state starts with this one: maps are copied on update, never written. */
const noEntries: ReadonlyMap<never, never> = new Map<never, never>()

export const initial = (options: Options): State => ({
  options,
  sessionID: Ids.session(options.cliSessionId, options.createdAt),
  clock: 0,
  userOrdinal: 0,
  assistantOrdinal: 0,
  message: undefined,
  finished: AppendOnlySet.empty(),
  lastUserMessageID: undefined,
  tools: noEntries,
  requests: noEntries,
  pendingRetries: [],
  busy: false,
  aborted: false,
  interrupted: false,
  model: undefined,
  permissionMode: undefined,
  cwd: options.cwd,
  compacting: false,
  pendingCompaction: undefined,
  requestOrdinal: 0,
  promptOrdinal: 0,
  queuedPrompts: [],
  promptAwaitsIdle: false,
  tasks: noEntries
})

type Writable<T> = { -readonly [K in keyof T]: T[K] }

/*
 * Copies with the fields spelled out. Every step copies the state it
 * changes, and V8 spreads a record this size (`{ ...state, clock }`) through
 * its generic path, ~30x slower than a literal of the same fields: the
 * translator spent most of its time there. Each helper takes the fields that
 * change, as a spread would.
 */

const copyState = (s: State): Writable<State> => ({
  options: s.options,
  sessionID: s.sessionID,
  clock: s.clock,
  userOrdinal: s.userOrdinal,
  assistantOrdinal: s.assistantOrdinal,
  message: s.message,
  finished: s.finished,
  lastUserMessageID: s.lastUserMessageID,
  tools: s.tools,
  requests: s.requests,
  pendingRetries: s.pendingRetries,
  busy: s.busy,
  aborted: s.aborted,
  interrupted: s.interrupted,
  model: s.model,
  permissionMode: s.permissionMode,
  cwd: s.cwd,
  compacting: s.compacting,
  pendingCompaction: s.pendingCompaction,
  requestOrdinal: s.requestOrdinal,
  promptOrdinal: s.promptOrdinal,
  queuedPrompts: s.queuedPrompts,
  promptAwaitsIdle: s.promptAwaitsIdle,
  tasks: s.tasks
})

/** `{ ...state, ...patch }`, at a literal's cost. */
export const update = (state: State, patch: Partial<State>): State => Object.assign(copyState(state), patch)

/** `update(state, { message })` for the per-delta path: a fixed-shape write, no `Object.assign`. */
export const withMessage = (state: State, message: OpenMessage): State => {
  const next = copyState(state)
  next.message = message
  return next
}

/** `updateMessage(message, { blocks })` for the per-delta path. */
export const withBlocks = (message: OpenMessage, blocks: ReadonlyArray<Block>): OpenMessage => {
  const next = copyMessage(message)
  next.blocks = blocks
  return next
}

const copyMessage = (m: OpenMessage): Writable<OpenMessage> => ({
  apiId: m.apiId,
  key: m.key,
  seed: m.seed,
  info: m.info,
  blocks: m.blocks,
  streamed: m.streamed,
  nextIndex: m.nextIndex,
  usage: m.usage,
  stopReason: m.stopReason,
  firstStamp: m.firstStamp
})

/** `{ ...message, ...patch }`, at a literal's cost. */
export const updateMessage = (message: OpenMessage, patch: Partial<OpenMessage>): OpenMessage =>
  Object.assign(copyMessage(message), patch)

/** `{ ...block, ...patch }`, at a literal's cost. */
export const updateBlock = (b: Block, patch: Partial<Block>): Block =>
  Object.assign({
    index: b.index,
    kind: b.kind,
    partID: b.partID,
    start: b.start,
    text: b.text,
    redacted: b.redacted,
    callID: b.callID,
    tool: b.tool,
    closed: b.closed
  }, patch)

/** The host renamed the session; the title lives with the rest of what the host told. */
export const retitled = (state: State, title: string): State =>
  update(state, { options: { ...state.options, host: { ...state.options.host, title } } })

export type Events = Array<Canonical.CanonicalEvent>

/** A step's result: the new state and what it emitted. */
export type Step = readonly [State, ReadonlyArray<Canonical.CanonicalEvent>]

export const emptyTokens: Canonical.Tokens = { input: 0, output: 0, reasoning: 0, cache: { read: 0, write: 0 } }

export const tokensOf = (usage: StepUsage): Canonical.Tokens => ({
  input: usage.input,
  output: usage.output,
  reasoning: 0,
  cache: { read: usage.cacheRead, write: usage.cacheWrite }
})

export const parseTime = (timestamp: unknown): number | undefined => {
  if (typeof timestamp !== "string") return undefined
  const ms = Date.parse(timestamp)
  return Number.isNaN(ms) ? undefined : ms
}

/** The block with this `index`, if the message opened one. */
export const blockAt = (blocks: ReadonlyArray<Block>, index: number): Block | undefined => {
  for (let i = 0; i < blocks.length; i++) {
    if (blocks[i]!.index === index) return blocks[i]
  }
  return undefined
}

/**
 * `blocks` with `block` in its index's place, or appended if new: a Map's
 * `set` on a copy (insertion order kept), without a Map's construction cost.
 */
export const withBlock = (blocks: ReadonlyArray<Block>, block: Block): ReadonlyArray<Block> => {
  const next = blocks.slice()
  for (let i = 0; i < next.length; i++) {
    if (next[i]!.index === block.index) {
      next[i] = block
      return next
    }
  }
  next.push(block)
  return next
}

export const setMap = <K, V>(map: ReadonlyMap<K, V>, key: K, value: V): ReadonlyMap<K, V> => {
  const next = new Map(map)
  next.set(key, value)
  return next
}

export const deleteMap = <K, V>(map: ReadonlyMap<K, V>, key: K): ReadonlyMap<K, V> => {
  if (!map.has(key)) return map
  const next = new Map(map)
  next.delete(key)
  return next
}

/** Reads a field of an unknown value without a cast. */
export const field = (value: unknown, key: string): unknown =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? Reflect.get(value, key) : undefined

export const stringField = (value: unknown, key: string): string | undefined => {
  const v = field(value, key)
  return typeof v === "string" ? v : undefined
}

export const numberField = (value: unknown, key: string): number | undefined => {
  const v = field(value, key)
  return typeof v === "number" ? v : undefined
}
