/**
 * The client's MCP servers as the CLI's `--mcp-config`: the same three
 * transports, under the names the client gave them.
 */
import type * as Acp from "@agentclientprotocol/sdk/unstable"

const headersOf = (headers: ReadonlyArray<Acp.HttpHeader>) => Object.fromEntries(headers.map((h) => [h.name, h.value]))

const configOf = (server: Acp.McpServer): Record<string, unknown> | undefined => {
  if ("type" in server && server.type === "http") return { type: "http", url: server.url, headers: headersOf(server.headers) }
  if ("type" in server && server.type === "sse") return { type: "sse", url: server.url, headers: headersOf(server.headers) }
  if ("command" in server) {
    return { type: "stdio", command: server.command, args: server.args, env: Object.fromEntries(server.env.map((e) => [e.name, e.value])) }
  }
  return undefined
}

/** `--mcp-config <json>`, or nothing for no servers. */
export const mcpArgs = (servers: ReadonlyArray<Acp.McpServer>): ReadonlyArray<string> => {
  const entries = servers.flatMap((server) => {
    const config = configOf(server)
    return config === undefined ? [] : [[server.name, config] as const]
  })
  return entries.length === 0 ? [] : ["--mcp-config", JSON.stringify({ mcpServers: Object.fromEntries(entries) })]
}
