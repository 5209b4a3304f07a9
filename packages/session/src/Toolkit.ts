/**
 * A toolkit is one in-process MCP server: a name and its tools. The CLI
 * lists it in `init` as an `sdk` server and names its tools
 * `mcp__<toolkit>__<tool>`; those names are what permission policies and
 * `allowedTools` see.
 *
 * `layer` provides toolkits to the sessions started in its scope (and to
 * their restarts and forked workers), with the tools' requirements taken from
 * the layer's own context: a tool can use the embedding service's database
 * client, say.
 */
import { Context, Effect, Layer } from "effect"
import type * as McpServer from "./internal/mcpServer.js"
import type * as Tool from "./Tool.js"

export interface Toolkit<out R> {
  readonly name: string
  readonly version: string
  readonly tools: ReadonlyArray<Tool.Tool<R>>
}

/** Names the CLI accepts for a server and its tools. */
const validName = /^[a-zA-Z0-9_-]{1,64}$/

export const make = <R>(
  name: string,
  tools: ReadonlyArray<Tool.Tool<R>>,
  options?: { readonly version?: string | undefined }
): Toolkit<R> => {
  for (const candidate of [name, ...tools.map((t) => t.name)]) {
    if (!validName.test(candidate)) throw new globalThis.Error(`Toolkit.make: ${JSON.stringify(candidate)} is not a valid MCP name (letters, digits, _ and -)`)
  }
  return { name, version: options?.version ?? "1.0.0", tools }
}

/** What the CLI calls a toolkit's tool: `mcp__<toolkit>__<tool>`. */
export const toolName = (toolkit: Toolkit<unknown>, tool: string): string => `mcp__${toolkit.name}__${tool}`

/** Every tool of a toolkit by its CLI name, for `allowedTools` or a permission policy. */
export const toolNames = (toolkit: Toolkit<unknown>): ReadonlyArray<string> => toolkit.tools.map((t) => toolName(toolkit, t.name))

/** The toolkits a session serves, their requirements provided. */
export class Toolkits extends Context.Tag("@skein/session/Toolkits")<Toolkits, {
  readonly servers: ReadonlyArray<McpServer.Served>
}>() {}

/** Binds toolkits to the context their tools need. */
export const bind = <R>(...toolkits: ReadonlyArray<Toolkit<R>>): Effect.Effect<Toolkits["Type"], never, R> =>
  Effect.map(Effect.context<R>(), (context) => ({
    servers: toolkits.map((toolkit): McpServer.Served => ({
      name: toolkit.name,
      version: toolkit.version,
      tools: toolkit.tools.map((tool) => ({
        definition: tool.definition,
        call: (args: unknown) => Effect.provide(tool.call(args), context)
      }))
    }))
  }))

/** Provides toolkits to sessions; their tools' requirements come from this layer's context. */
export const layer = <R>(...toolkits: ReadonlyArray<Toolkit<R>>): Layer.Layer<Toolkits, never, R> => {
  const names = toolkits.map((t) => t.name)
  const duplicate = names.find((n, i) => names.indexOf(n) !== i)
  if (duplicate !== undefined) throw new globalThis.Error(`Toolkit.layer: two toolkits are named ${duplicate}`)
  return Layer.effect(Toolkits, bind(...toolkits))
}
