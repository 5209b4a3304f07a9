/**
 * The commands a client offers after `/`: the CLI's slash commands and
 * skills as its `init` lists them, and skein's own `/compact`, which runs
 * host-side compaction (`@skein/compact`) rather than the CLI's.
 */
import type * as Acp from "@agentclientprotocol/sdk/unstable"
import type { CliMessage } from "@skein/protocol"

/** What the CLI's `init` does not say: descriptions of the commands every session has. */
const known: Readonly<Record<string, string>> = {
  compact: "Compact the conversation (a summary replaces older turns); optional instructions follow",
  context: "Show what fills the context window",
  cost: "Show the session's cost and duration",
  init: "Write a CLAUDE.md for this project",
  review: "Review a pull request",
  "security-review": "Review the pending changes for security issues",
  "pr-comments": "Get the comments of a pull request"
}

/** The CLI's own interactive commands that mean nothing over a protocol. */
const hidden: ReadonlySet<string> = new Set(["clear", "exit", "quit", "login", "logout", "help", "doctor", "vim", "terminal-setup"])

export const fromInit = (init: CliMessage.Init): Array<Acp.AvailableCommand> => {
  const names = new Set<string>(["compact"])
  for (const name of init.slash_commands ?? []) names.add(name.replace(/^\//, ""))
  for (const name of init.skills ?? []) names.add(name.replace(/^\//, ""))
  return [...names].filter((name) => !hidden.has(name)).map((name) => ({
    name,
    description: known[name] ?? (init.skills?.includes(name) === true ? `Skill: ${name}` : `Claude Code's /${name}`),
    input: name === "compact" ? { hint: "instructions for the summary (optional)" } : null
  }))
}

/** `/compact` and its instructions, when the prompt is that command. */
export const compactCommand = (text: string): { readonly instructions: string | undefined } | undefined => {
  const match = /^\s*\/compact(?:\s+([\s\S]*))?$/.exec(text)
  if (match === null) return undefined
  const instructions = match[1]?.trim()
  return { instructions: instructions === undefined || instructions.length === 0 ? undefined : instructions }
}
