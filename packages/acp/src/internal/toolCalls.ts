/**
 * A canonical tool part as ACP's tool call: kind, title, locations, status
 * and content. The part keeps the CLI's own name and input in
 * `metadata.cli` (see `@skein/canonical`), and ACP's vocabulary is closer
 * to the CLI's than to opencode's, so everything here reads the CLI's view.
 */
import type * as Acp from "@agentclientprotocol/sdk/unstable"
import { type Canonical, Json } from "@skein/protocol"

type JsonObject = Canonical.JsonObject

export interface CliTool {
  readonly tool: string
  readonly input: JsonObject
}

/** The CLI's name and input of a tool part: `metadata.cli` where the part shows opencode's, else the part's own. */
export const cliOf = (part: Canonical.ToolPart): CliTool => {
  const cli = part.metadata?.["cli"]
  if (Json.isJsonObject(cli)) {
    const tool = cli["tool"]
    const input = cli["input"]
    if (typeof tool === "string" && Json.isJsonObject(input)) return { tool, input }
  }
  return { tool: part.tool, input: part.state.input }
}

const kinds: Readonly<Record<string, Acp.ToolKind>> = {
  Read: "read",
  NotebookRead: "read",
  Edit: "edit",
  MultiEdit: "edit",
  Write: "edit",
  NotebookEdit: "edit",
  Bash: "execute",
  BashOutput: "execute",
  KillShell: "execute",
  KillBash: "execute",
  Grep: "search",
  Glob: "search",
  LS: "search",
  WebFetch: "fetch",
  WebSearch: "fetch",
  Task: "think",
  Agent: "think",
  TodoWrite: "think",
  ExitPlanMode: "switch_mode",
  EnterPlanMode: "switch_mode"
}

export const kindOf = (tool: string): Acp.ToolKind => kinds[tool] ?? "other"

const str = (input: JsonObject, key: string): string | undefined => {
  const value = input[key]
  return typeof value === "string" && value.length > 0 ? value : undefined
}

const pathOf = (input: JsonObject): string | undefined =>
  str(input, "file_path") ?? str(input, "notebook_path") ?? str(input, "path")

/** What a person reads in the client's row for the call. */
export const titleOf = ({ input, tool }: CliTool): string => {
  const path = pathOf(input)
  switch (tool) {
    case "Bash":
      return str(input, "command") ?? str(input, "description") ?? "Bash"
    case "Read":
    case "Edit":
    case "MultiEdit":
    case "Write":
    case "NotebookEdit":
      return path === undefined ? tool : `${tool} ${path}`
    case "Grep":
      return str(input, "pattern") === undefined ? "Grep" : `grep "${str(input, "pattern")}"${path === undefined ? "" : ` ${path}`}`
    case "Glob":
      return str(input, "pattern") === undefined ? "Glob" : `Find ${str(input, "pattern")}`
    case "WebFetch":
      return str(input, "url") ?? "Fetch"
    case "WebSearch":
      return str(input, "query") === undefined ? "Web search" : `Search "${str(input, "query")}"`
    case "Task":
    case "Agent":
      return str(input, "description") ?? tool
    case "TodoWrite":
      return "Update the plan"
    case "ExitPlanMode":
      return "Ready to code?"
    default:
      return tool
  }
}

export const locationsOf = ({ input }: CliTool): Array<Acp.ToolCallLocation> => {
  const path = pathOf(input)
  if (path === undefined) return []
  const line = input["offset"]
  return [typeof line === "number" ? { path, line } : { path }]
}

export const statusOf = (state: Canonical.ToolState): Acp.ToolCallStatus => {
  switch (state.status) {
    case "pending":
      return "pending"
    case "running":
      return "in_progress"
    case "completed":
      return "completed"
    case "error":
      return "failed"
  }
}

const text = (value: string): Acp.ToolCallContent => ({ type: "content", content: { type: "text", text: value } })

/** An edit's change as ACP diffs: one per replaced string (the client shows them against the file). */
const diffsOf = ({ input, tool }: CliTool): Array<Acp.ToolCallContent> => {
  const path = pathOf(input)
  if (path === undefined) return []
  switch (tool) {
    case "Write":
      return [{ type: "diff", path, oldText: null, newText: str(input, "content") ?? "" }]
    case "Edit":
      return [{ type: "diff", path, oldText: str(input, "old_string") ?? "", newText: str(input, "new_string") ?? "" }]
    case "MultiEdit": {
      const edits = input["edits"]
      if (!Array.isArray(edits)) return []
      return edits.flatMap((edit): Array<Acp.ToolCallContent> =>
        Json.isJsonObject(edit)
          ? [{ type: "diff", path, oldText: str(edit, "old_string") ?? "", newText: str(edit, "new_string") ?? "" }]
          : []
      )
    }
    default:
      return []
  }
}

/** A client draws a long read itself, from the file; what it needs of the output is a glimpse. */
const outputLimit = 20_000

const clipped = (output: string) => output.length > outputLimit ? `${output.slice(0, outputLimit)}\n…` : output

/** Diffs for edits, the printed text for commands (and what other tools returned), the error for a failure. */
export const contentOf = (cli: CliTool, state: Canonical.ToolState): Array<Acp.ToolCallContent> | undefined => {
  switch (state.status) {
    case "pending":
    case "running": {
      const diffs = kindOf(cli.tool) === "edit" ? diffsOf(cli) : []
      return diffs.length > 0 ? diffs : undefined
    }
    case "completed": {
      if (kindOf(cli.tool) === "edit") {
        const diffs = diffsOf(cli)
        if (diffs.length > 0) return diffs
      }
      if (state.output.length === 0) return []
      return [text(cli.tool === "Bash" ? "```console\n" + clipped(state.output) + "\n```" : clipped(state.output))]
    }
    case "error":
      return [text(clipped(state.error))]
  }
}

/** The CLI's todo list (a `TodoWrite` input) as ACP plan entries. */
export const planOf = ({ input }: CliTool): Array<Acp.PlanEntry> | undefined => {
  const todos = input["todos"]
  if (!Array.isArray(todos)) return undefined
  return todos.flatMap((todo): Array<Acp.PlanEntry> => {
    if (!Json.isJsonObject(todo)) return []
    const content = str(todo, "content")
    if (content === undefined) return []
    const status = todo["status"]
    return [{
      content,
      priority: "medium",
      status: status === "in_progress" || status === "completed" ? status : "pending"
    }]
  })
}
