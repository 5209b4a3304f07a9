/**
 * Anthropic stream events (`stream_event`, with `--include-partial-messages`)
 * to parts and deltas. One `message_start` opens one assistant message and
 * its step; `message_stop` finishes both.
 */
import type { Anthropic } from "@skein/protocol"
import { Canonical, CliMessage } from "@skein/protocol"
import type { BlockStart } from "./messages.js"
import { closeBlock, finishAssistant, openAssistant, openBlock, usageOf } from "./messages.js"
import type { Events, State } from "./state.js"
import { blockAt, update, updateBlock, updateMessage, withBlock, withBlocks, withMessage } from "./state.js"

/** `now` (epoch ms) dates the message a `message_start` opens: the CLI stamps it only once it is whole. */
export const onStreamEvent = (state: State, events: Events, message: CliMessage.StreamEvent, now: number): State => {
  const event = message.event
  if (!CliMessage.isKnownStreamEvent(event)) return state
  switch (event.type) {
    case "message_start":
      return onMessageStart(state, events, event, now)
    case "content_block_start":
      return onBlockStart(state, events, event)
    case "content_block_delta":
      return onBlockDelta(state, events, event)
    case "content_block_stop":
      return state.message === undefined ? state : closeBlock(state, events, event.index)
    case "message_delta":
      return onMessageDelta(state, event)
    case "message_stop":
      return finishAssistant(state, events)
    case "ping":
      return state
    case "error":
      events.push(Canonical.event("session.error", {
        sessionID: state.sessionID,
        error: { name: "APIError", data: { message: event.error.message, type: event.error.type, isRetryable: false } }
      }))
      return state
  }
}

const onMessageStart = (state: State, events: Events, event: Anthropic.MessageStartEvent, now: number): State => {
  const open = state.message === undefined ? state : finishAssistant(state, events)
  return openAssistant(open, events, event.message.id, {
    model: event.message.model,
    usage: usageOf(event.message.usage),
    streamed: true,
    created: Math.max(open.clock, now)
  })
}

const startOf = (index: number, kind: BlockStart["kind"], redacted: boolean, callID: string, tool: string): BlockStart => ({
  index,
  text: "",
  redacted,
  callID,
  tool,
  input: {},
  kind
})

export const blockStart = (index: number, block: Anthropic.ContentBlock): BlockStart | undefined => {
  switch (block.type) {
    case "text":
      return startOf(index, "text", false, "", "")
    case "thinking":
      return startOf(index, "reasoning", false, "", "")
    case "redacted_thinking":
      return startOf(index, "reasoning", true, "", "")
    case "tool_use":
    case "server_tool_use":
    case "mcp_tool_use": {
      const id = Reflect.get(block, "id")
      const name = Reflect.get(block, "name")
      return startOf(index, "tool", false, typeof id === "string" ? id : `block-${index}`, typeof name === "string" ? name : block.type)
    }
    default:
      return undefined
  }
}

const onBlockStart = (state: State, events: Events, event: Anthropic.ContentBlockStartEvent): State => {
  const message = state.message
  const start = blockStart(event.index, event.content_block)
  if (message === undefined || start === undefined) {
    events.push(Canonical.event("session.cli_event", {
      sessionID: state.sessionID,
      kind: message === undefined ? "OrphanBlock" : "UnknownBlock",
      cliType: event.content_block.type,
      data: event
    }))
    return state
  }
  return openBlock(state, events, message, start)
}

const onBlockDelta = (state: State, events: Events, event: Anthropic.ContentBlockDeltaEvent): State => {
  const message = state.message
  const block = message === undefined ? undefined : blockAt(message.blocks, event.index)
  if (message === undefined || block === undefined || block.closed) return state
  const delta = event.delta
  let text: string
  let field: string
  switch (delta.type) {
    case "text_delta":
      text = Reflect.get(delta, "text")
      field = "text"
      break
    case "thinking_delta":
      text = Reflect.get(delta, "thinking")
      field = "text"
      break
    case "input_json_delta":
      text = Reflect.get(delta, "partial_json")
      field = "input"
      break
    default:
      return state
  }
  if (typeof text !== "string" || text === "") return state
  events.push(Canonical.event("message.part.delta", {
    sessionID: state.sessionID,
    messageID: message.info.id,
    partID: block.partID,
    field,
    delta: text
  }))
  const next = updateBlock(block, { text: block.text + text })
  return withMessage(state, withBlocks(message, withBlock(message.blocks, next)))
}

const onMessageDelta = (state: State, event: Anthropic.MessageDeltaEvent): State => {
  const message = state.message
  if (message === undefined) return state
  return update(state, {
    message: updateMessage(message, {
      usage: usageOf(event.usage, message.usage),
      stopReason: event.delta.stop_reason ?? message.stopReason
    })
  })
}
