/**
 * User messages: `tool_result` blocks complete their tool parts (opencode
 * keeps a tool's result on the assistant's part, not in a user message);
 * text becomes a user message with text parts.
 */
import { Anthropic, Canonical, Json } from "@skein/protocol"
import type { UserContent } from "./messages.js"
import { finishAssistant, flushCompaction, openUser, partUpdated, tickUser } from "./messages.js"
import * as NativeTools from "./nativeTools.js"
import type { Events, OpenTool, State } from "./state.js"
import { deleteMap, field, update } from "./state.js"

export interface WholeUser {
  readonly message: Anthropic.MessageParam
  readonly uuid: string | undefined
  readonly timestamp: number | undefined
  /** The source marks it as made by the CLI (a compact summary, a replay): not a prompt, its text parts `synthetic`. */
  readonly synthetic: boolean
  /** The tool's structured result (`tool_use_result` on stdout, `toolUseResult` in transcripts). */
  readonly toolUseResult: unknown
}

export const onUser = (state: State, events: Events, user: WholeUser): State => {
  const content = user.message.content
  const blocks: ReadonlyArray<Anthropic.ContentBlock> = typeof content === "string"
    ? [{ type: "text", text: content }]
    : content
  // The CLI's interrupt marker follows the reply it cut short, on stdout and in the transcript alike.
  const marked = isInterruptMarker(blocks) ? update(state, { interrupted: true }) : state
  // A whole (not streamed) assistant message ends where the next user message begins.
  let next = marked.message !== undefined && !marked.message.streamed ? finishAssistant(marked, events) : marked
  const contents: Array<UserContent> = []
  for (const block of blocks) {
    if (!Anthropic.isKnownBlock(block)) continue
    if (block.type === "tool_result") {
      next = completeTool(next, events, block, user)
    } else if (block.type === "text") {
      contents.push({ type: "text", text: block.text })
    } else {
      const file = fileOf(block)
      if (file !== undefined) contents.push(file)
    }
  }
  if (contents.length === 0) return next
  const prompt = isPrompt(user, firstText(contents))
  if (prompt) next = update(next, { interrupted: false })
  // What the CLI prints itself is stamped alike on stdout and in the transcript: it ticks the clock.
  if (!prompt) next = flushCompaction(tickUser(next, user.timestamp), events)
  const created = user.timestamp ?? next.clock
  return openUser(next, events, {
    uuid: user.uuid ?? `user-${created}-${next.userOrdinal}`,
    created,
    contents,
    synthetic: !prompt,
    prompt
  })
}

/**
 * An image or a document the user attached, as opencode's file part: its
 * content in a `data:` URL, so a client shows it as it shows its own. A
 * source that is a URL or a file the API fetches keeps its URL.
 */
const fileOf = (block: Anthropic.KnownContentBlock): UserContent | undefined => {
  if (block.type !== "image" && block.type !== "document") return undefined
  const source = block.source
  const filename = block.type === "document" && typeof block.title === "string" ? { filename: block.title } : {}
  switch (source.type) {
    case "base64":
      return { type: "file", mime: source.media_type, url: `data:${source.media_type};base64,${source.data}`, ...filename }
    case "text":
      return { type: "file", mime: source.media_type, url: `data:${source.media_type};base64,${Buffer.from(source.data, "utf8").toString("base64")}`, ...filename }
    case "url":
      return { type: "file", mime: block.type === "image" ? "image/*" : "application/octet-stream", url: source.url, ...filename }
    default:
      return undefined
  }
}

/** Texts the CLI writes as user messages of its own (and prints on stdout). */
const interruptMarker = "[Request interrupted"

const cliMarkers = [interruptMarker, "<local-command-stdout>", "<local-command-stderr>"]

const isInterruptMarker = (blocks: ReadonlyArray<Anthropic.ContentBlock>): boolean =>
  blocks.some((block) => block.type === "text" && "text" in block && typeof block.text === "string" && block.text.startsWith(interruptMarker))

/** A prompt (what the user typed, a slash command) rather than a message the CLI made. */
const isPrompt = (user: WholeUser, text: string | undefined): boolean =>
  !user.synthetic && !cliMarkers.some((marker) => text?.startsWith(marker) === true)

const firstText = (contents: ReadonlyArray<UserContent>): string | undefined => {
  for (const content of contents) if (content.type === "text") return content.text
  return undefined
}

const outputOf = (block: Anthropic.ToolResultBlock): string => {
  const content = block.content
  if (content === undefined) return ""
  if (typeof content === "string") return content
  return content.flatMap((item) => {
    const text = item.type === "text" ? Reflect.get(item, "text") : undefined
    return typeof text === "string" ? [text] : []
  }).join("\n")
}

const titleOf = (tool: OpenTool): string => {
  const description = field(tool.input, "description")
  if (typeof description === "string") return description
  const command = field(tool.input, "command")
  if (typeof command === "string") return command
  const path = field(tool.input, "file_path") ?? field(tool.input, "path") ?? field(tool.input, "pattern")
  return typeof path === "string" ? path : tool.tool
}

const completeTool = (state: State, events: Events, block: Anthropic.ToolResultBlock, user: WholeUser): State => {
  const tool = state.tools.get(block.tool_use_id)
  if (tool === undefined) return state
  const end = Math.max(user.timestamp ?? state.clock, tool.start)
  const output = outputOf(block)
  const result = Json.isJsonObject(user.toolUseResult) ? user.toolUseResult : {}
  const title = titleOf(tool)
  events.push(partUpdated(
    state,
    NativeTools.toolPart(
      { id: tool.partID, sessionID: state.sessionID, messageID: tool.messageID, callID: block.tool_use_id },
      tool,
      (input): Canonical.ToolState =>
        block.is_error === true
          ? { status: "error", input, error: output, time: { start: tool.start, end } }
          : {
            status: "completed",
            input,
            output,
            title,
            metadata: NativeTools.completedMetadata(tool.tool, tool.input, output, result),
            time: { start: tool.start, end }
          }
    )
  ))
  return inferReply(update(state, { tools: deleteMap(state.tools, block.tool_use_id) }), events, block)
}

/**
 * A tool that ran answered its permission: when the host's answer was not
 * part of the input (a capture), the result says what it was.
 */
const inferReply = (state: State, events: Events, block: Anthropic.ToolResultBlock): State => {
  for (const [requestId, request] of state.requests) {
    if (request.callID !== block.tool_use_id) continue
    events.push(
      request.kind === "permission"
        ? Canonical.event("permission.replied", {
          sessionID: state.sessionID,
          requestID: request.id,
          reply: block.is_error === true ? "reject" : "once"
        })
        : block.is_error === true
        ? Canonical.event("question.rejected", { sessionID: state.sessionID, requestID: request.id })
        : Canonical.event("question.replied", { sessionID: state.sessionID, requestID: request.id, answers: [] })
    )
    return update(state, { requests: deleteMap(state.requests, requestId) })
  }
  return state
}
