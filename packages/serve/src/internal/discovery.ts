/**
 * The startup routes opencode's clients call before anything else (the TUI
 * exits when `/config`, `/config/providers`, `/provider` or `/agent` fail),
 * answered for what actually runs behind skein: Claude Code, with Anthropic
 * as its one provider.
 */
import * as Os from "node:os"

const io = (text: boolean, image: boolean) => ({ text, audio: false, image, video: false, pdf: image })

const model = (id: string, name: string) => ({
  id,
  providerID: "anthropic",
  api: { id, url: "https://api.anthropic.com", npm: "@anthropic-ai/sdk" },
  name,
  family: "claude",
  capabilities: {
    temperature: true,
    reasoning: true,
    attachment: true,
    toolcall: true,
    input: io(true, true),
    output: io(true, false),
    interleaved: true
  },
  cost: { input: 0, output: 0, cache: { read: 0, write: 0 } },
  limit: { context: 200000, output: 64000 },
  status: "active",
  options: {},
  headers: {},
  release_date: "",
  variants: {}
})

/** The CLI resolves its own aliases: these are the names it accepts for `--model`. */
export const models = [
  model("default", "Claude Code default"),
  model("sonnet", "Claude Sonnet"),
  model("opus", "Claude Opus"),
  model("haiku", "Claude Haiku")
]

export const provider = {
  id: "anthropic",
  name: "Anthropic (Claude Code)",
  source: "custom",
  env: ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"],
  options: {},
  models: Object.fromEntries(models.map((m) => [m.id, m]))
}

export const defaults = { anthropic: "default" }

export const config = (directory: string) => ({
  $schema: "https://opencode.ai/config.json",
  model: "anthropic/default",
  autoupdate: false,
  share: "disabled",
  username: Os.userInfo().username,
  agent: {},
  provider: {},
  mcp: {},
  skein: { directory }
})

const allowAll = [{ permission: "*", pattern: "*", action: "ask" }]

export const agents = [
  {
    name: "build",
    description: "Claude Code, with the host answering its permission requests",
    mode: "primary",
    native: true,
    permission: allowAll,
    model: { providerID: "anthropic", modelID: "default" },
    options: {}
  }
]

export const path = (directory: string, state: string, configDir: string) => ({
  home: Os.homedir(),
  state,
  config: configDir,
  worktree: directory,
  directory
})

export const project = (id: string, directory: string) => ({
  id,
  worktree: directory,
  vcs: "git",
  time: { created: 0, updated: 0 },
  sandboxes: []
})

/** The 1.18 TUI's `LocationInfo`. */
export const location = (directory: string) => ({ directory, project: { id: "global", directory } })
