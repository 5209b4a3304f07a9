/**
 * The lifecycle of opencode messages and parts, shared by the streamed and
 * the whole-message paths: open an assistant message (one API message, one
 * step), open and close its blocks, finish it with its step-finish; open
 * user messages.
 */
import { Canonical } from "@skein/protocol"
import * as Ids from "../Ids.js"
import * as AppendOnlySet from "./appendOnlySet.js"
import * as NativeTools from "./nativeTools.js"
import type { Block, BlockKind, Events, OpenedInfo, OpenMessage, State, StepUsage } from "./state.js"
import { blockAt, emptyTokens, setMap, tokensOf, update, updateBlock, updateMessage, withBlock } from "./state.js"

export const partUpdated = (state: State, part: Canonical.Part): Canonical.CanonicalEvent =>
  Canonical.event("message.part.updated", { sessionID: state.sessionID, part })

export const messageUpdated = (state: State, info: Canonical.MessageInfo): Canonical.CanonicalEvent =>
  Canonical.event("message.updated", { sessionID: state.sessionID, info })

const identity = (state: State, ...keys: ReadonlyArray<string | number>) =>
  [state.options.cliSessionId, ...keys].join("/")

export const usageOf = (usage: {
  readonly input_tokens?: number | null | undefined
  readonly output_tokens?: number | null | undefined
  readonly cache_read_input_tokens?: number | null | undefined
  readonly cache_creation_input_tokens?: number | null | undefined
}, previous?: StepUsage): StepUsage => ({
  input: usage.input_tokens ?? previous?.input ?? 0,
  output: usage.output_tokens ?? previous?.output ?? 0,
  cacheRead: usage.cache_read_input_tokens ?? previous?.cacheRead ?? 0,
  cacheWrite: usage.cache_creation_input_tokens ?? previous?.cacheWrite ?? 0
})

const aborted: Canonical.ErrorInfo = { name: "MessageAbortedError", data: { message: "interrupted" } }

/**
 * A streamed message keeps the time it opened with: opencode's TUI keys a
 * message by `time.created` and id, so a new one would list it twice. One
 * opened undated (before any clock or arrival time) takes its first stamp.
 */
const createdOf = (message: OpenMessage): number =>
  message.streamed && message.info.time.created > 0
    ? message.info.time.created
    : (message.firstStamp ?? message.info.time.created)

/** Opens the assistant message of API message `apiId`: message.updated, retry parts, step-start. */
export const openAssistant = (
  before: State,
  events: Events,
  apiId: string,
  options: {
    readonly model: string
    readonly usage: StepUsage
    readonly streamed: boolean
    /**
     * Its `time.created` (default: the CLI clock, 0 before the CLI's first
     * stamp). A streamed message keeps it to the end; opencode's TUI orders
     * messages by it, so a message created at 0 shows above its prompt.
     */
    readonly created?: number | undefined
  }
): State => {
  const state = flushCompaction(before, events)
  const key = Ids.sortKey(state.clock, Ids.ASSISTANT_ORDINAL + state.assistantOrdinal)
  const seed = Ids.seed(identity(state, apiId))
  const id = Ids.make("msg", key, seed)
  const cwd = state.cwd ?? ""
  const info: OpenedInfo = {
    id,
    sessionID: state.sessionID,
    role: "assistant",
    time: { created: options.created ?? state.clock },
    parentID: state.lastUserMessageID ?? "",
    modelID: options.model,
    providerID: "anthropic",
    mode: "build",
    agent: "build",
    path: { cwd, root: cwd },
    cost: 0,
    tokens: emptyTokens
  }
  events.push(messageUpdated(state, info))
  for (const retry of state.pendingRetries) {
    events.push(partUpdated(state, {
      id: Ids.part(key, Ids.Slot.retry(retry.attempt), seed),
      sessionID: state.sessionID,
      messageID: id,
      type: "retry",
      attempt: retry.attempt,
      error: retry.error,
      time: { created: retry.created }
    }))
  }
  events.push(partUpdated(state, {
    id: Ids.part(key, Ids.Slot.stepStart, seed),
    sessionID: state.sessionID,
    messageID: id,
    type: "step-start"
  }))
  const message: OpenMessage = {
    apiId,
    key,
    seed,
    info,
    blocks: [],
    streamed: options.streamed,
    nextIndex: 0,
    usage: options.usage,
    stopReason: null,
    firstStamp: undefined
  }
  return update(state, { message, pendingRetries: [], assistantOrdinal: state.assistantOrdinal + 1 })
}

export interface BlockStart {
  readonly index: number
  readonly kind: BlockKind
  readonly text: string
  readonly redacted: boolean
  readonly callID: string
  readonly tool: string
  readonly input: Canonical.JsonObject
}

/** The first `message.part.updated` of a block: empty text, reasoning, or a pending tool. */
export const openBlock = (state: State, events: Events, message: OpenMessage, start: BlockStart): State => {
  const partID = Ids.part(message.key, Ids.Slot.block(start.index), message.seed)
  const block: Block = {
    index: start.index,
    kind: start.kind,
    partID,
    start: state.clock,
    text: start.text,
    redacted: start.redacted,
    callID: start.callID,
    tool: start.tool,
    closed: false
  }
  events.push(partUpdated(state, blockPart(state, message, block, "open", start.input)))
  const next = updateMessage(message, {
    blocks: withBlock(message.blocks, block),
    nextIndex: Math.max(message.nextIndex, start.index + 1)
  })
  return update(state, { message: next })
}

/** Parses a tool's streamed input; bad JSON gives `{}` (the caller reports it). */
export const parseInput = (raw: string): { readonly input: Canonical.JsonObject; readonly ok: boolean } => {
  if (raw.trim() === "") return { input: {}, ok: true }
  try {
    const value: unknown = JSON.parse(raw)
    return typeof value === "object" && value !== null && !Array.isArray(value)
      ? { input: { ...value }, ok: true }
      : { input: {}, ok: false }
  } catch {
    return { input: {}, ok: false }
  }
}

const blockPart = (
  state: State,
  message: OpenMessage,
  block: Block,
  phase: "open" | "closed",
  input: Canonical.JsonObject
): Canonical.Part => {
  const id = block.partID
  const sessionID = state.sessionID
  const messageID = message.info.id
  const time = phase === "open" ? { start: block.start } : { start: block.start, end: state.clock }
  switch (block.kind) {
    case "text":
      return { id, sessionID, messageID, type: "text", text: block.text, time }
    case "reasoning":
      return block.redacted
        ? { id, sessionID, messageID, type: "reasoning", text: block.text, time, redacted: true, metadata: { redacted: true } }
        : { id, sessionID, messageID, type: "reasoning", text: block.text, time }
    case "tool":
      return NativeTools.toolPart(
        { id, sessionID, messageID, callID: block.callID },
        { tool: block.tool, input },
        (native) =>
          phase === "open"
            ? { status: "pending", input: native, raw: block.text }
            : { status: "running", input: native, time: { start: state.clock } }
      )
  }
}

/**
 * Closes a block: text and reasoning get their full text and `time.end`; a
 * tool becomes `running` with its parsed input and waits for its result.
 * `input` overrides the streamed JSON (a whole `assistant` block has it parsed).
 */
export const closeBlock = (
  state: State,
  events: Events,
  index: number,
  final?: { readonly text?: string; readonly input?: Canonical.JsonObject }
): State => {
  const message = state.message
  const block = message === undefined ? undefined : blockAt(message.blocks, index)
  if (message === undefined || block === undefined || block.closed) return state
  const text = final?.text ?? block.text
  const closed = updateBlock(block, { text, closed: true })
  const parsed = final?.input !== undefined || block.kind !== "tool"
    ? { input: final?.input ?? {}, ok: true }
    : parseInput(block.text)
  if (!parsed.ok) {
    events.push(Canonical.event("session.cli_event", {
      sessionID: state.sessionID,
      kind: "BadToolInput",
      data: block.text,
      issue: `tool input of ${block.callID} is not a JSON object; using {}`
    }))
  }
  events.push(partUpdated(state, blockPart(state, message, closed, "closed", parsed.input)))
  const tools = block.kind === "tool"
    ? setMap(state.tools, block.callID, {
      messageID: message.info.id,
      partID: block.partID,
      tool: block.tool,
      input: parsed.input,
      start: state.clock
    })
    : state.tools
  return update(state, { tools, message: updateMessage(message, { blocks: withBlock(message.blocks, closed) }) })
}

/** Ends the open assistant message: its open blocks close, then step-finish and the final message.updated. */
export const finishAssistant = (state: State, events: Events): State => {
  const message = state.message
  if (message === undefined) return state
  let next = state
  for (const block of message.blocks) {
    if (!block.closed) next = closeBlock(next, events, block.index)
  }
  const reason = message.stopReason ?? "unknown"
  const tokens = tokensOf(message.usage)
  events.push(partUpdated(next, {
    id: Ids.part(message.key, Ids.Slot.stepFinish, message.seed),
    sessionID: state.sessionID,
    messageID: message.info.id,
    type: "step-finish",
    reason,
    cost: 0,
    tokens
  }))
  // The opened info with its time, tokens and finish, spelled out in the opened info's key order (a spread of it is slow).
  const opened = message.info
  const info: Canonical.AssistantMessage = {
    id: opened.id,
    sessionID: opened.sessionID,
    role: opened.role,
    time: { created: createdOf(message), completed: next.clock },
    parentID: opened.parentID,
    modelID: opened.modelID,
    providerID: opened.providerID,
    mode: opened.mode,
    agent: opened.agent,
    path: opened.path,
    cost: opened.cost,
    tokens,
    finish: reason
  }
  // As opencode marks a reply cut short by an abort; its clients show it as interrupted.
  events.push(messageUpdated(next, state.interrupted && message.stopReason === null ? { ...info, error: aborted } : info))
  return update(next, { message: undefined, finished: AppendOnlySet.add(next.finished, message.apiId) })
}

/**
 * The agent and model a user message was sent with. opencode's clients read
 * them off every user message (its TUI draws none without); Claude Code has
 * one agent and the session's own model, which `/agent` and `/config/providers` list.
 */
const promptedWith = { agent: "build", model: { providerID: "anthropic", modelID: "default" } } as const

/** What a user message shows: its texts and the files attached to it, in order. */
export type UserContent =
  | { readonly type: "text"; readonly text: string }
  | Omit<Canonical.FilePart, "id" | "sessionID" | "messageID">

/** Opens a user message with its text and file parts; `uuid` is the CLI's entry uuid. */
export const openUser = (
  state: State,
  events: Events,
  options: {
    readonly uuid: string
    readonly created: number
    readonly contents: ReadonlyArray<UserContent>
    readonly synthetic: boolean
    /** A prompt: the live stream does not show it, so it takes an ordinal of its own range. */
    readonly prompt: boolean
  }
): State => {
  const userOrdinal = options.prompt ? state.userOrdinal : state.userOrdinal + 1
  const promptOrdinal = options.prompt ? state.promptOrdinal + 1 : state.promptOrdinal
  const key = Ids.sortKey(state.clock, options.prompt ? Ids.PROMPT_ORDINAL + promptOrdinal : userOrdinal)
  const seed = Ids.seed(identity(state, options.uuid))
  const id = Ids.make("msg", key, seed)
  events.push(messageUpdated(state, {
    id,
    sessionID: state.sessionID,
    role: "user",
    time: { created: options.created },
    agent: promptedWith.agent,
    model: promptedWith.model
  }))
  options.contents.forEach((content, index) => {
    const partID = Ids.part(key, Ids.Slot.block(index), seed)
    const time = { start: options.created, end: options.created }
    events.push(partUpdated(
      state,
      content.type !== "text"
        ? { id: partID, sessionID: state.sessionID, messageID: id, ...content }
        : options.synthetic
        ? { id: partID, sessionID: state.sessionID, messageID: id, type: "text", text: content.text, synthetic: true, time }
        : { id: partID, sessionID: state.sessionID, messageID: id, type: "text", text: content.text, time }
    ))
  })
  return update(state, { userOrdinal, promptOrdinal, lastUserMessageID: id })
}

/** Ticks the CLI clock to a user message the CLI printed: both views carry its timestamp. */
export const tickUser = (state: State, stamp: number | undefined): State =>
  stamp === undefined || stamp <= state.clock
    ? state
    : update(state, { clock: stamp, userOrdinal: 0, promptOrdinal: 0, assistantOrdinal: 0 })

/** Ticks the CLI clock to an assistant record's timestamp; user-message ordinals restart. */
export const tick = (state: State, stamp: number | undefined): State => {
  if (stamp === undefined) return state
  const message = state.message === undefined || state.message.firstStamp !== undefined
    ? state.message
    : updateMessage(state.message, { firstStamp: stamp })
  if (stamp <= state.clock) return message === state.message ? state : update(state, { message })
  return update(state, { clock: stamp, userOrdinal: 0, promptOrdinal: 0, assistantOrdinal: 0, message })
}

/**
 * Mints the message of a compaction boundary: a user message with the
 * `compaction` part, then `session.compacted`. The boundary itself carries no
 * timestamp on stdout, so this waits for the summary that follows it (which
 * both stdout and transcript stamp) and ticks to it first: the ids after a
 * compaction are then the same live and in a history that starts there.
 */
export const flushCompaction = (state: State, events: Events): State => {
  const boundary = state.pendingCompaction
  if (boundary === undefined) return state
  const ordinal = state.userOrdinal + 1
  const key = Ids.sortKey(state.clock, ordinal)
  const seed = Ids.seed(identity(state, boundary.uuid))
  const id = Ids.make("msg", key, seed)
  events.push(messageUpdated(state, { id, sessionID: state.sessionID, role: "user", time: { created: state.clock } }))
  events.push(partUpdated(state, {
    id: Ids.part(key, Ids.Slot.compaction, seed),
    sessionID: state.sessionID,
    messageID: id,
    type: "compaction",
    auto: boundary.auto
  }))
  events.push(Canonical.event("session.compacted", { sessionID: state.sessionID }))
  return update(state, { userOrdinal: ordinal, lastUserMessageID: id, pendingCompaction: undefined })
}
