/**
 * Turns a scripted reply into the Anthropic API's wire shapes: the full
 * `Message` for non-streaming requests and the event list for SSE.
 */
import type { Anthropic } from "@skein/protocol"

/** @internal */
export type Block =
  | { readonly _tag: "Text"; readonly text: string }
  | { readonly _tag: "Thinking"; readonly thinking: string; readonly signature: string }
  | {
    readonly _tag: "ToolUse"
    readonly id: string | undefined
    readonly name: string
    readonly input: Readonly<Record<string, unknown>>
  }

/** @internal */
export interface Rendered {
  readonly message: Anthropic.Message
  readonly events: ReadonlyArray<Anthropic.MessageStreamEvent>
}

/** Splits text into pieces of two words each, as the API streams a few tokens per delta. */
export const chunkText = (text: string): ReadonlyArray<string> => {
  const words = text.match(/\s*\S+\s*/g) ?? (text.length > 0 ? [text] : [])
  const chunks: Array<string> = []
  for (let i = 0; i < words.length; i += 2) {
    chunks.push(words.slice(i, i + 2).join(""))
  }
  return chunks
}

const chunkJson = (json: string): ReadonlyArray<string> => {
  const chunks: Array<string> = [""]
  for (let i = 0; i < json.length; i += 16) {
    chunks.push(json.slice(i, i + 16))
  }
  return chunks
}

/** A rough token count: four characters a token, at least one. */
export const estimateTokens = (chars: number): number => Math.max(1, Math.ceil(chars / 4))

/** @internal */
export const render = (options: {
  readonly id: string
  readonly model: string
  readonly blocks: ReadonlyArray<Block>
  readonly toolUseId: (index: number) => string
  readonly stopReason: string | undefined
  readonly usage: Partial<Anthropic.Usage>
  readonly inputTokens: number
}): Rendered => {
  const content: Array<Anthropic.ContentBlock> = []
  const events: Array<Anthropic.MessageStreamEvent> = []
  let outputChars = 0
  options.blocks.forEach((block, index) => {
    switch (block._tag) {
      case "Text": {
        outputChars += block.text.length
        content.push({ type: "text", text: block.text })
        events.push({ type: "content_block_start", index, content_block: { type: "text", text: "" } })
        for (const text of chunkText(block.text)) {
          events.push({ type: "content_block_delta", index, delta: { type: "text_delta", text } })
        }
        break
      }
      case "Thinking": {
        outputChars += block.thinking.length
        content.push({ type: "thinking", thinking: block.thinking, signature: block.signature })
        events.push({
          type: "content_block_start",
          index,
          content_block: { type: "thinking", thinking: "", signature: "" }
        })
        for (const thinking of chunkText(block.thinking)) {
          events.push({ type: "content_block_delta", index, delta: { type: "thinking_delta", thinking } })
        }
        events.push({
          type: "content_block_delta",
          index,
          delta: { type: "signature_delta", signature: block.signature }
        })
        break
      }
      case "ToolUse": {
        const id = block.id ?? options.toolUseId(index)
        const json = JSON.stringify(block.input)
        outputChars += json.length
        content.push({ type: "tool_use", id, name: block.name, input: block.input })
        events.push({
          type: "content_block_start",
          index,
          content_block: { type: "tool_use", id, name: block.name, input: {} }
        })
        for (const partial_json of chunkJson(json)) {
          events.push({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json } })
        }
        break
      }
    }
    events.push({ type: "content_block_stop", index })
  })
  const stopReason = options.stopReason ??
    (options.blocks.some((block) => block._tag === "ToolUse") ? "tool_use" : "end_turn")
  const usage: Anthropic.Usage = {
    input_tokens: options.inputTokens,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
    output_tokens: estimateTokens(outputChars),
    service_tier: "standard",
    ...options.usage
  }
  const message: Anthropic.Message = {
    id: options.id,
    type: "message",
    role: "assistant",
    model: options.model,
    content,
    stop_reason: stopReason,
    stop_sequence: null,
    usage
  }
  const start: Anthropic.MessageStartEvent = {
    type: "message_start",
    message: { ...message, content: [], stop_reason: null, usage: { ...usage, output_tokens: 1 } }
  }
  // The API sends a ping right after the first content_block_start.
  const ping: Anthropic.PingEvent = { type: "ping" }
  const body = events.length > 0 ? [events[0]!, ping, ...events.slice(1)] : [ping]
  return {
    message,
    events: [
      start,
      ...body,
      {
        type: "message_delta",
        delta: { stop_reason: stopReason, stop_sequence: null },
        usage: {
          output_tokens: usage.output_tokens,
          input_tokens: usage.input_tokens,
          cache_creation_input_tokens: usage.cache_creation_input_tokens ?? null,
          cache_read_input_tokens: usage.cache_read_input_tokens ?? null
        }
      },
      { type: "message_stop" }
    ]
  }
}

/** One SSE frame, exactly as the API writes it. */
export const sseFrame = (event: Anthropic.MessageStreamEvent): string =>
  `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`
