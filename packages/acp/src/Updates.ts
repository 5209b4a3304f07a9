/**
 * Canonical events as ACP `session/update`s: the thin mapping ACP needs.
 *
 * The canonical translator (`@skein/canonical`) already turns the CLI's
 * stream and its transcripts into messages and parts; this maps each part
 * to what an ACP client draws: text to `agent_message_chunk`, reasoning to
 * `agent_thought_chunk`, a tool part to `tool_call` the first time and
 * `tool_call_update` after, a `TodoWrite` to `plan`, a turn's metrics to
 * `usage_update`, a compaction to a line of agent text. A part's text may arrive as deltas (streamed) or whole
 * (a transcript, a CLI without partial messages): the mapper remembers how
 * much of each part it sent and sends only the rest, so both give the same
 * chunks in the end.
 *
 * A `Mapper` holds that memory for one session; `replay` maps a whole
 * history, user messages included (a live session never shows the
 * client's own prompt back).
 */
import type * as Acp from "@agentclientprotocol/sdk/unstable"
import type { History } from "@skein/canonical"
import type { Canonical } from "@skein/protocol"
import * as ToolCalls from "./internal/toolCalls.js"

export interface Options {
  /** Show user messages (a replay); a live session leaves them out: the client sent them. */
  readonly users: boolean
  /** The model's context window, the `size` of `usage_update`. Default 200,000 tokens. */
  readonly contextWindow?: number | undefined
}

interface Seen {
  readonly kind: "text" | "reasoning"
  readonly role: "user" | "assistant"
  /** How many characters of the part's text the client has. */
  sent: number
}

interface SeenTool {
  status: Acp.ToolCallStatus
  title: string
}

export interface Mapper {
  readonly map: (event: Canonical.CanonicalEvent) => ReadonlyArray<Acp.SessionUpdate>
}

const defaultContextWindow = 200_000

const chunk = (role: "user" | "assistant", kind: "text" | "reasoning", text: string, messageId: string): Acp.SessionUpdate => {
  const content: Acp.ContentBlock = { type: "text", text }
  if (role === "user") return { sessionUpdate: "user_message_chunk", content, messageId }
  return kind === "text"
    ? { sessionUpdate: "agent_message_chunk", content, messageId }
    : { sessionUpdate: "agent_thought_chunk", content, messageId }
}

/** A user's attached image as ACP image content; other files show as a link to what they were. */
const fileChunk = (part: Canonical.FilePart): Acp.SessionUpdate | undefined => {
  const match = /^data:([^;,]+);base64,(.*)$/s.exec(part.url)
  if (match !== null && match[1]!.startsWith("image/")) {
    return { sessionUpdate: "user_message_chunk", content: { type: "image", mimeType: match[1]!, data: match[2]! }, messageId: part.messageID }
  }
  const name = part.filename ?? part.mime
  return { sessionUpdate: "user_message_chunk", content: { type: "resource_link", name, uri: part.filename ?? `file:${name}`, mimeType: part.mime }, messageId: part.messageID }
}

export const make = (options: Options): Mapper => {
  const roles = new Map<string, "user" | "assistant">()
  const parts = new Map<string, Seen>()
  const tools = new Map<string, SeenTool>()
  const plans = new Set<string>()
  const compactions = new Set<string>()
  const contextWindow = options.contextWindow ?? defaultContextWindow

  const onText = (part: Canonical.TextPart | Canonical.ReasoningPart): ReadonlyArray<Acp.SessionUpdate> => {
    const role = roles.get(part.messageID) ?? "assistant"
    if (role === "user" && (!options.users || part.type !== "text" || part.synthetic === true || part.ignored === true)) return []
    const kind = part.type
    const seen = parts.get(part.id) ?? { kind, role, sent: 0 }
    parts.set(part.id, seen)
    if (part.text.length <= seen.sent) return []
    const rest = part.text.slice(seen.sent)
    seen.sent = part.text.length
    return [chunk(role, kind, rest, part.messageID)]
  }

  /** The list arrives whole once the call runs (a pending call's input is still streaming); it is sent once. */
  const onPlan = (part: Canonical.ToolPart, cli: ToolCalls.CliTool): ReadonlyArray<Acp.SessionUpdate> => {
    const entries = ToolCalls.planOf(cli)
    if (entries === undefined || part.state.status === "pending" || plans.has(part.callID)) return []
    plans.add(part.callID)
    return [{ sessionUpdate: "plan", entries }]
  }

  const onTool = (part: Canonical.ToolPart): ReadonlyArray<Acp.SessionUpdate> => {
    const cli = ToolCalls.cliOf(part)
    const known = tools.get(part.callID)
    if (cli.tool === "TodoWrite") return onPlan(part, cli)
    const status = ToolCalls.statusOf(part.state)
    const title = ToolCalls.titleOf(cli)
    const content = ToolCalls.contentOf(cli, part.state)
    const locations = ToolCalls.locationsOf(cli)
    const rawOutput = part.state.status === "completed" ? part.state.output : part.state.status === "error" ? part.state.error : undefined
    if (known === undefined) {
      tools.set(part.callID, { status, title })
      return [{
        sessionUpdate: "tool_call",
        toolCallId: part.callID,
        title,
        kind: ToolCalls.kindOf(cli.tool),
        status,
        locations,
        rawInput: cli.input,
        ...(content === undefined ? {} : { content }),
        ...(rawOutput === undefined ? {} : { rawOutput })
      }]
    }
    if (known.status === status && known.title === title) return []
    known.status = status
    known.title = title
    return [{
      sessionUpdate: "tool_call_update",
      toolCallId: part.callID,
      status,
      title,
      kind: ToolCalls.kindOf(cli.tool),
      locations,
      rawInput: cli.input,
      ...(content === undefined ? {} : { content }),
      ...(rawOutput === undefined ? {} : { rawOutput })
    }]
  }

  const onPart = (part: Canonical.Part): ReadonlyArray<Acp.SessionUpdate> => {
    switch (part.type) {
      case "text":
      case "reasoning":
        return onText(part)
      case "tool":
        return onTool(part)
      case "compaction": {
        if (compactions.has(part.id)) return []
        compactions.add(part.id)
        const text = `${part.auto ? "The conversation was compacted automatically" : "The conversation was compacted"}: a summary now stands for the earlier messages.\n\n`
        return [chunk("assistant", "text", text, part.messageID)]
      }
      case "file": {
        if (!options.users || roles.get(part.messageID) !== "user") return []
        const update = fileChunk(part)
        return update === undefined ? [] : [update]
      }
      default:
        return []
    }
  }

  const onDelta = (properties: Canonical.PropertiesOf<"message.part.delta">): ReadonlyArray<Acp.SessionUpdate> => {
    if (properties.field !== "text") return []
    const seen = parts.get(properties.partID)
    if (seen === undefined || (seen.role === "user" && !options.users)) return []
    seen.sent += properties.delta.length
    return [chunk(seen.role, seen.kind, properties.delta, properties.messageID)]
  }

  const onMetrics = (properties: Canonical.PropertiesOf<"session.metrics">): ReadonlyArray<Acp.SessionUpdate> => {
    const tokens = properties.tokens
    if (tokens === undefined) return []
    const used = tokens.input + tokens.cache.read + tokens.cache.write + tokens.output
    return [{
      sessionUpdate: "usage_update",
      used,
      size: contextWindow,
      ...(properties.cost === undefined ? {} : { cost: { amount: properties.cost, currency: "USD" } })
    }]
  }

  const map = (event: Canonical.CanonicalEvent): ReadonlyArray<Acp.SessionUpdate> => {
    switch (event.type) {
      case "message.updated":
        roles.set(event.properties.info.id, event.properties.info.role)
        return []
      case "message.part.updated":
        return onPart(event.properties.part)
      case "message.part.delta":
        return onDelta(event.properties)
      case "session.metrics":
        return onMetrics(event.properties)
      default:
        return []
    }
  }
  return { map }
}

/** A whole history (`History.fromTranscript`) as the updates that show it: what `session/load` replays. */
export const replay = (messages: ReadonlyArray<History.WithParts>, options?: Omit<Options, "users">): ReadonlyArray<Acp.SessionUpdate> => {
  const mapper = make({ ...options, users: true })
  const out: Array<Acp.SessionUpdate> = []
  for (const message of messages) {
    const sessionID = message.info.sessionID
    out.push(...mapper.map({ type: "message.updated", properties: { sessionID, info: message.info } }))
    for (const part of message.parts) out.push(...mapper.map({ type: "message.part.updated", properties: { sessionID, part } }))
  }
  return out
}
