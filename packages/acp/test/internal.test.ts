import { describe, expect, it } from "@effect/vitest"
import * as Commands from "../src/internal/commands.js"
import { mcpArgs } from "../src/internal/mcpServers.js"
import * as PromptContent from "../src/internal/promptContent.js"

describe("prompt content", () => {
  it("keeps a text-only prompt a string", () => {
    expect(PromptContent.toUserContent([{ type: "text", text: "a" }, { type: "text", text: "b" }])).toBe("a\nb")
  })

  it("sends images as images, embedded text as context, links and other blobs as @mentions, PDFs as documents", () => {
    expect(PromptContent.toUserContent([
      { type: "text", text: "look" },
      { type: "image", mimeType: "image/png", data: "iVBOR" },
      { type: "resource", resource: { uri: "file:///p/a.ts", text: "const a = 1" } },
      { type: "resource_link", name: "b.ts", uri: "file:///p/b.ts" },
      { type: "resource", resource: { uri: "file:///p/c.pdf", mimeType: "application/pdf", blob: "JVBER" } },
      { type: "resource", resource: { uri: "file:///p/d.bin", mimeType: "application/octet-stream", blob: "AAAA" } }
    ])).toEqual([
      { type: "text", text: "look" },
      { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBOR" } },
      { type: "text", text: "<context ref=\"file:///p/a.ts\">\nconst a = 1\n</context>" },
      { type: "text", text: "@/p/b.ts" },
      { type: "document", source: { type: "base64", media_type: "application/pdf", data: "JVBER" }, title: "/p/c.pdf" },
      { type: "text", text: "@/p/d.bin" }
    ])
  })
})

describe("MCP servers", () => {
  it("go to the CLI as one --mcp-config, under the client's names", () => {
    const args = mcpArgs([
      { name: "files", command: "/bin/files", args: ["--root", "/p"], env: [{ name: "TOKEN", value: "t" }] },
      { type: "http", name: "web", url: "https://example.test/mcp", headers: [{ name: "Authorization", value: "Bearer x" }] }
    ])
    expect(args[0]).toBe("--mcp-config")
    expect(JSON.parse(args[1]!)).toEqual({
      mcpServers: {
        files: { type: "stdio", command: "/bin/files", args: ["--root", "/p"], env: { TOKEN: "t" } },
        web: { type: "http", url: "https://example.test/mcp", headers: { Authorization: "Bearer x" } }
      }
    })
    expect(mcpArgs([])).toEqual([])
  })
})

describe("commands", () => {
  it("reads /compact and its instructions", () => {
    expect(Commands.compactCommand("/compact")).toEqual({ instructions: undefined })
    expect(Commands.compactCommand("  /compact keep the API notes ")).toEqual({ instructions: "keep the API notes" })
    expect(Commands.compactCommand("/compacted")).toBeUndefined()
    expect(Commands.compactCommand("please /compact")).toBeUndefined()
  })
})
