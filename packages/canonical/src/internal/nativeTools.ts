/**
 * Claude Code's tools in opencode's vocabulary.
 *
 * opencode's clients draw a tool natively only under opencode's own name
 * (`bash`, `read`, `edit`, …), with opencode's camelCase input, and only
 * once the few metadata fields their views check are there: the TUI's bash
 * block needs `metadata.output`, its edit block a unified `metadata.diff`,
 * its todo block `metadata.todos`, glob and grep counts `metadata.count` and
 * `metadata.matches`. Under any other name a tool is a generic row listing
 * its scalar inputs. So a tool with an opencode counterpart is named and
 * shaped as opencode's, and the CLI's own name and input stay beside it in
 * the part's `metadata.cli`: nothing the CLI said is lost. AskUserQuestion
 * is opencode's `question`, its answers the lists that view shows. Every
 * other tool (MCP tools, NotebookEdit, ExitPlanMode, whose counterpart would
 * switch the client's agent) keeps its name and input.
 *
 * Permission asks follow suit: the TUI's prompt has a view per opencode
 * permission (`bash` shows the command, read the path, …), which reads the
 * asking tool's part, so the part's native input is what makes it specific.
 * Every change to a file asks as `edit`, as opencode's write does, with the
 * file's path in `metadata.filepath`.
 */
import { type Canonical, Json } from "@skein/protocol"

type JsonObject = Canonical.JsonObject

/** What the CLI called the tool and gave it: kept on the part for whoever needs the CLI's view. */
export interface CliTool {
  readonly tool: string
  readonly input: JsonObject
}

interface Native {
  readonly name: string
  readonly input: (input: JsonObject) => JsonObject
  /** Added to a completed state's metadata, from the CLI's input, the result text and its structured result. */
  readonly completed?: (input: JsonObject, output: string, result: JsonObject) => JsonObject
}

/** The listed fields of `input` under new names, where present. */
const rename = (renames: { readonly [cli: string]: string }) => (input: JsonObject): JsonObject => {
  const out: { [key: string]: unknown } = {}
  for (const [from, to] of Object.entries(renames)) {
    const value = input[from]
    if (value !== undefined) out[to] = value
  }
  return out
}

const numberOf = (value: unknown): number | undefined => typeof value === "number" && Number.isFinite(value) ? value : undefined

interface Hunk {
  readonly oldStart: number
  readonly oldLines: number
  readonly newStart: number
  readonly newLines: number
  readonly lines: ReadonlyArray<string>
}

const isHunk = (hunk: unknown): hunk is Hunk => {
  if (!Json.isJsonObject(hunk)) return false
  const lines = hunk["lines"]
  return ["oldStart", "oldLines", "newStart", "newLines"].every((key) => numberOf(hunk[key]) !== undefined) &&
    Array.isArray(lines) && lines.every((line) => typeof line === "string")
}

/**
 * The CLI's `structuredPatch` (its edit's hunks, lines prefixed with ` `,
 * `-` or `+`) as the unified patch of one file that opencode's edit tool
 * reports; undefined when the result carries no hunks.
 */
export const unifiedDiff = (path: string, structuredPatch: unknown): string | undefined => {
  if (!Array.isArray(structuredPatch) || structuredPatch.length === 0 || !structuredPatch.every(isHunk)) return undefined
  const hunks = structuredPatch.map((h) =>
    [`@@ -${h.oldStart},${h.oldLines} +${h.newStart},${h.newLines} @@`, ...h.lines].join("\n")
  )
  return [`Index: ${path}`, "=".repeat(67), `--- ${path}`, `+++ ${path}`, ...hunks, ""].join("\n")
}

const pathOf = (input: JsonObject): string => typeof input["file_path"] === "string" ? input["file_path"] : ""

/** An edit's diff, and the empty diagnostics its view looks up by path (no language server here). */
const editMetadata = (input: JsonObject, _output: string, result: JsonObject): JsonObject => {
  const diff = unifiedDiff(pathOf(input), result["structuredPatch"])
  return diff === undefined ? { diagnostics: {} } : { diff, diagnostics: {} }
}

/** The questions of an AskUserQuestion call, the objects among them. */
const questionsOf = (input: JsonObject): ReadonlyArray<JsonObject> => {
  const questions = input["questions"]
  return Array.isArray(questions) ? questions.filter(Json.isJsonObject) : []
}

const natives: { readonly [cli: string]: Native } = {
  Bash: {
    name: "bash",
    input: rename({ command: "command", timeout: "timeout", description: "description" }),
    completed: (_input, output) => ({ output })
  },
  Read: { name: "read", input: rename({ file_path: "filePath", offset: "offset", limit: "limit" }) },
  Edit: {
    name: "edit",
    input: rename({ file_path: "filePath", old_string: "oldString", new_string: "newString", replace_all: "replaceAll" }),
    completed: editMetadata
  },
  MultiEdit: { name: "edit", input: rename({ file_path: "filePath" }), completed: editMetadata },
  Write: {
    name: "write",
    input: rename({ file_path: "filePath", content: "content" }),
    completed: () => ({ diagnostics: {} })
  },
  Glob: {
    name: "glob",
    input: rename({ pattern: "pattern", path: "path" }),
    completed: (_input, _output, result) => {
      const count = numberOf(result["numFiles"])
      return count === undefined ? {} : { count }
    }
  },
  Grep: {
    name: "grep",
    input: rename({ pattern: "pattern", path: "path", glob: "include" }),
    completed: (_input, _output, result) => {
      const matches = numberOf(result["numMatches"]) ?? numberOf(result["numFiles"])
      return matches === undefined ? {} : { matches }
    }
  },
  WebFetch: { name: "webfetch", input: rename({ url: "url", prompt: "prompt" }) },
  WebSearch: { name: "websearch", input: rename({ query: "query" }) },
  TodoWrite: {
    name: "todowrite",
    input: rename({ todos: "todos" }),
    completed: (input) => Array.isArray(input["todos"]) ? { todos: input["todos"] } : {}
  },
  Task: { name: "task", input: rename({ description: "description", prompt: "prompt", subagent_type: "subagent_type" }) },
  Agent: { name: "task", input: rename({ description: "description", prompt: "prompt", subagent_type: "subagent_type" }) },
  Skill: { name: "skill", input: rename({ skill: "name" }) },
  AskUserQuestion: {
    name: "question",
    input: (input) => ({
      questions: questionsOf(input).map(({ multiSelect, ...rest }) =>
        typeof multiSelect === "boolean" ? { ...rest, multiple: multiSelect } : rest
      )
    }),
    completed: (input, _output, result) => {
      const answers = result["answers"]
      if (!Json.isJsonObject(answers)) return {}
      // Keyed by question text, labels joined as the CLI's picker joins them: one string per question.
      return {
        answers: questionsOf(input).map((q) => {
          const answer = answers[String(q["question"])]
          return typeof answer === "string" ? [answer] : []
        })
      }
    }
  }
}


/** The CLI's tools that change a file, and the input naming it. */
const fileChanges: { readonly [cli: string]: string } = {
  Edit: "file_path",
  MultiEdit: "file_path",
  Write: "file_path",
  NotebookEdit: "notebook_path"
}

/** opencode's permission for a CLI tool's ask: `edit` for a file change, else its tool's name. */
export const permission = (cliTool: string): string => fileChanges[cliTool] !== undefined ? "edit" : name(cliTool)

/**
 * An ask's metadata: the CLI's input as it was, the path opencode's edit
 * prompt shows, and the CLI's call under `cli` when the ask is renamed.
 */
export const permissionMetadata = (cliTool: string, cliInput: JsonObject): JsonObject => {
  const pathField = fileChanges[cliTool]
  const filepath = pathField === undefined ? undefined : cliInput[pathField]
  return {
    ...cliInput,
    ...(typeof filepath === "string" ? { filepath } : {}),
    ...(permission(cliTool) === cliTool ? {} : { cli: { tool: cliTool, input: cliInput } })
  }
}

/** opencode's name for a CLI tool; the CLI's own when opencode has none. */
export const name = (cliTool: string): string => natives[cliTool]?.name ?? cliTool

/** The input opencode's tool would have had; the CLI's own for a tool opencode lacks. */
export const input = (cliTool: string, cliInput: JsonObject): JsonObject => natives[cliTool]?.input(cliInput) ?? cliInput

/** The part's own metadata: the CLI's name and input, for a tool shown under opencode's. */
const partMetadata = (cliTool: string, cliInput: JsonObject): JsonObject | undefined =>
  natives[cliTool] === undefined ? undefined : { cli: { tool: cliTool, input: cliInput } }

/** A completed state's metadata: the CLI's structured result, with what opencode's view of the tool reads. */
export const completedMetadata = (cliTool: string, cliInput: JsonObject, output: string, result: JsonObject): JsonObject => ({
  ...result,
  ...natives[cliTool]?.completed?.(cliInput, output, result)
})

/** The CLI's view of a tool part: its own name and input, whether or not the part shows opencode's. */
export const cliOf = (part: Canonical.ToolPart): CliTool => {
  const cli = part.metadata?.["cli"]
  if (Json.isJsonObject(cli)) {
    const tool = cli["tool"]
    const cliInput = cli["input"]
    if (typeof tool === "string" && Json.isJsonObject(cliInput)) return { tool, input: cliInput }
  }
  return { tool: part.tool, input: part.state.input }
}

/**
 * A tool part in opencode's vocabulary, from the CLI's tool and input;
 * `state` gets the native input.
 */
export const toolPart = (
  base: Pick<Canonical.ToolPart, "id" | "sessionID" | "messageID" | "callID">,
  cli: CliTool,
  state: (input: JsonObject) => Canonical.ToolState
): Canonical.ToolPart => {
  const metadata = partMetadata(cli.tool, cli.input)
  return {
    id: base.id,
    sessionID: base.sessionID,
    messageID: base.messageID,
    type: "tool",
    callID: base.callID,
    tool: name(cli.tool),
    state: state(input(cli.tool, cli.input)),
    ...(metadata === undefined ? {} : { metadata })
  }
}
