/**
 * The startup routes: health, what runs behind the server (Claude Code,
 * Anthropic as its one provider), and the 1.18 TUI's `/api/*` lists.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import * as Discovery from "../discovery.js"
import { Directory, ServeApi } from "../../ServeApi.js"

export interface Options {
  readonly roots: ReadonlyArray<string>
  readonly stateDir: string
  readonly configDir: string
}

const at = <A>(f: (directory: string) => A) => () => Effect.map(Directory, f)
const constant = <A>(value: A) => () => Effect.succeed(value)

export const layer = (options: Options) =>
  HttpApiBuilder.group(ServeApi, "discovery", (handlers) =>
    handlers
      .handle("health", constant({ healthy: true, version: "skein" }))
      .handle("config", at(Discovery.config))
      .handle("configProviders", constant({ providers: [Discovery.provider], default: Discovery.defaults }))
      .handle("provider", constant({ all: [Discovery.provider], default: Discovery.defaults, connected: ["anthropic"] }))
      .handle("providerAuth", constant({}))
      .handle("agent", constant(Discovery.agents))
      .handle("command", constant([]))
      .handle("path", at((dir) => Discovery.path(dir, options.stateDir, options.configDir)))
      .handle("vcs", constant({}))
      .handle("lsp", constant([]))
      .handle("mcp", constant({}))
      .handle("formatter", constant([]))
      .handle("projectCurrent", at((dir) => Discovery.project("global", dir)))
      .handle("projectDirectories", constant(options.roots.map((directory) => ({ directory }))))
      .handle("capabilities", constant({ backgroundSubagents: false }))
      .handle("console", constant({ consoleManagedProviders: [], switchableOrgCount: 0 }))
      .handle("workspace", constant([]))
      .handle("workspaceStatus", constant({}))
      .handle("resource", constant({}))
  )

/** `{location, data}`: the lists are empty where Claude Code has nothing of the kind to offer through this API. */
export const locationsLayer = HttpApiBuilder.group(ServeApi, "locations", (handlers) => {
  const list = at((dir) => ({ location: Discovery.location(dir), data: [] }))
  return handlers
    .handle("location", at(Discovery.location))
    .handle("models", list)
    .handle("providers", list)
    .handle("agents", list)
    .handle("commands", list)
    .handle("skills", list)
    .handle("references", list)
    .handle("integrations", list)
})
