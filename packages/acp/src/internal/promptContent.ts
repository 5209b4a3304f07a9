/**
 * An ACP prompt as the content of a Claude Code user message. Text is
 * text; an image is an image; an embedded text resource is the file's text
 * in a `<context>` block the model can tell from the request, as the CLI's
 * own `@file` mentions are; a PDF blob is a document; a resource link is its
 * URI, which the model reads with its own tools (as an `@path` mention).
 */
import type * as Acp from "@agentclientprotocol/sdk/unstable"
import type { Anthropic } from "@skein/protocol"
import * as Url from "node:url"

const imageTypes: ReadonlySet<string> = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"])

/** A `file:` URI as a path, anything else as it is. */
const pathOf = (uri: string): string => {
  if (!uri.startsWith("file:")) return uri
  try {
    return Url.fileURLToPath(uri)
  } catch {
    return uri
  }
}

const text = (value: string): Anthropic.ContentBlock => ({ type: "text", text: value })

const block = (item: Acp.ContentBlock): ReadonlyArray<Anthropic.ContentBlock> => {
  switch (item.type) {
    case "text":
      return [text(item.text)]
    case "image":
      return imageTypes.has(item.mimeType)
        ? [{ type: "image", source: { type: "base64", media_type: item.mimeType, data: item.data } }]
        : item.uri === undefined || item.uri === null
        ? []
        : [text(`@${pathOf(item.uri)}`)]
    case "audio":
      return []
    case "resource_link":
      return [text(`@${pathOf(item.uri)}`)]
    case "resource": {
      const resource = item.resource
      if ("text" in resource) {
        return [text(`<context ref="${resource.uri}">\n${resource.text}\n</context>`)]
      }
      if (resource.mimeType === "application/pdf") {
        return [{ type: "document", source: { type: "base64", media_type: "application/pdf", data: resource.blob }, title: pathOf(resource.uri) }]
      }
      if (resource.mimeType !== undefined && resource.mimeType !== null && imageTypes.has(resource.mimeType)) {
        return [{ type: "image", source: { type: "base64", media_type: resource.mimeType, data: resource.blob } }]
      }
      return [text(`@${pathOf(resource.uri)}`)]
    }
  }
}

/** The user message's content: a plain string when the prompt is text alone. */
export const toUserContent = (prompt: ReadonlyArray<Acp.ContentBlock>): string | ReadonlyArray<Anthropic.ContentBlock> => {
  const blocks = prompt.flatMap(block)
  if (blocks.every((b) => b.type === "text")) return blocks.map((b) => ("text" in b ? b.text : "")).join("\n")
  return blocks
}

/** The prompt's text alone: what a slash command is read from. */
export const textOf = (prompt: ReadonlyArray<Acp.ContentBlock>): string =>
  prompt.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("\n")
