/**
 * Whole `assistant` messages. The CLI prints one per content block, all with
 * the API message's id. When the message was streamed they only confirm it
 * (and tick the CLI clock); otherwise (no partial messages, or a transcript)
 * each block becomes its part at once, in the same shape the stream gives.
 */
import type { Anthropic } from "@skein/protocol"
import * as AppendOnlySet from "./appendOnlySet.js"
import { closeBlock, finishAssistant, openAssistant, openBlock, tick, usageOf } from "./messages.js"
import type { Events, State } from "./state.js"
import { update, updateMessage } from "./state.js"
import { blockStart } from "./streamEvents.js"

export interface WholeAssistant {
  readonly message: Anthropic.Message
  readonly timestamp: number | undefined
  /** The block's index in its API message, where the source says (`apiBlockIndex` in transcripts). */
  readonly blockIndex: number | undefined
}

export const onAssistant = (state: State, events: Events, whole: WholeAssistant): State => {
  const api = whole.message
  if (AppendOnlySet.has(state.finished, api.id)) return tick(state, whole.timestamp)
  if (state.message?.apiId === api.id && state.message.streamed) return tick(state, whole.timestamp)
  let next = state.message !== undefined && state.message.apiId !== api.id ? finishAssistant(state, events) : state
  if (next.message === undefined) {
    // Dated by its first record, as its last update will be (see `finishAssistant`).
    next = openAssistant(next, events, api.id, { model: api.model, usage: usageOf(api.usage), streamed: false, created: whole.timestamp })
  }
  let index = whole.blockIndex ?? next.message?.nextIndex ?? 0
  for (const block of api.content) {
    const start = blockStart(index, block)
    const message = next.message
    if (start !== undefined && message !== undefined) {
      next = openBlock(next, events, message, start)
      next = tick(next, whole.timestamp)
      next = closeBlock(next, events, index, finalOf(block))
    }
    index++
  }
  next = tick(next, whole.timestamp)
  const message = next.message
  if (message === undefined) return next
  return update(next, {
    message: updateMessage(message, { usage: usageOf(api.usage, message.usage), stopReason: api.stop_reason ?? message.stopReason })
  })
}

const finalOf = (block: Anthropic.ContentBlock): { readonly text?: string; readonly input?: Anthropic.ToolUseBlock["input"] } => {
  switch (block.type) {
    case "text":
    case "thinking": {
      const text = Reflect.get(block, block.type)
      return typeof text === "string" ? { text } : {}
    }
    case "tool_use": {
      const input: unknown = Reflect.get(block, "input")
      return typeof input === "object" && input !== null && !Array.isArray(input) ? { input: { ...input } } : {}
    }
    default:
      return {}
  }
}
