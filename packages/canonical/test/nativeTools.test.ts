import { describe, expect, it } from "@effect/vitest"
import type { Canonical } from "@skein/protocol"
import * as NativeTools from "../src/internal/nativeTools.js"
import { todos } from "../src/Todos.js"

const base = { id: "prt_1", sessionID: "ses_1", messageID: "msg_1", callID: "toolu_1" }

const completed = (cli: NativeTools.CliTool, output: string, result: Canonical.JsonObject = {}) =>
  NativeTools.toolPart(base, cli, (input) => ({
    status: "completed",
    input,
    output,
    title: "t",
    metadata: NativeTools.completedMetadata(cli.tool, cli.input, output, result),
    time: { start: 1, end: 2 }
  }))

/** An Edit's `toolUseResult` as CLI 2.1.332 writes it (trimmed to what matters). */
const editResult = {
  filePath: "/w/notes.txt",
  oldString: "beta",
  newString: "gamma",
  replaceAll: false,
  structuredPatch: [{ oldStart: 1, oldLines: 2, newStart: 1, newLines: 2, lines: [" alpha", "-beta", "+gamma"] }]
}

describe("NativeTools", () => {
  it("shows Bash as opencode's bash, its output in metadata.output, the CLI's call in metadata.cli", () => {
    const cli = { tool: "Bash", input: { command: "echo one", description: "Print one", run_in_background: false } }
    const part = completed(cli, "one", { stdout: "one", stderr: "", interrupted: false })
    expect(part.tool).toBe("bash")
    expect(part.state.input).toEqual({ command: "echo one", description: "Print one" })
    expect(part.state.status === "completed" && part.state.metadata).toEqual({ stdout: "one", stderr: "", interrupted: false, output: "one" })
    expect(part.metadata).toEqual({ cli })
    expect(NativeTools.cliOf(part)).toEqual(cli)
  })

  it("shows Edit with opencode's fields and a unified diff of the CLI's hunks", () => {
    const cli = { tool: "Edit", input: { file_path: "/w/notes.txt", old_string: "beta", new_string: "gamma", replace_all: false } }
    const part = completed(cli, "The file /w/notes.txt has been updated.", editResult)
    expect(part.tool).toBe("edit")
    expect(part.state.input).toEqual({ filePath: "/w/notes.txt", oldString: "beta", newString: "gamma", replaceAll: false })
    const metadata = part.state.status === "completed" ? part.state.metadata : {}
    expect(metadata["diff"]).toBe(
      [
        "Index: /w/notes.txt",
        "=".repeat(67),
        "--- /w/notes.txt",
        "+++ /w/notes.txt",
        "@@ -1,2 +1,2 @@",
        " alpha",
        "-beta",
        "+gamma",
        ""
      ].join("\n")
    )
    expect(metadata["diagnostics"]).toEqual({})
    expect(metadata["structuredPatch"]).toEqual(editResult.structuredPatch)
  })

  it("gives no diff for hunks it does not recognize, and keeps the rest", () => {
    expect(NativeTools.unifiedDiff("/f", undefined)).toBeUndefined()
    expect(NativeTools.unifiedDiff("/f", [])).toBeUndefined()
    expect(NativeTools.unifiedDiff("/f", [{ oldStart: 1, lines: ["-a"] }])).toBeUndefined()
    expect(NativeTools.unifiedDiff("/f", [{ oldStart: 1, oldLines: 1, newStart: 1, newLines: 1, lines: [1] }])).toBeUndefined()
    const cli = { tool: "Edit", input: { file_path: "/f", old_string: "a", new_string: "b" } }
    const part = completed(cli, "ok", { structuredPatch: "nonsense" })
    expect(part.state.status === "completed" && part.state.metadata).toEqual({ structuredPatch: "nonsense", diagnostics: {} })
  })

  it("maps the other tools opencode has to its names, fields and counts", () => {
    const glob = completed({ tool: "Glob", input: { pattern: "**/*.ts", path: "/w" } }, "a.ts", { numFiles: 3, filenames: [] })
    expect([glob.tool, glob.state.input, glob.state.status === "completed" && glob.state.metadata["count"]])
      .toEqual(["glob", { pattern: "**/*.ts", path: "/w" }, 3])
    const grep = completed({ tool: "Grep", input: { pattern: "x", glob: "*.md", output_mode: "content" } }, "", { numMatches: 7, numFiles: 2 })
    expect([grep.tool, grep.state.input, grep.state.status === "completed" && grep.state.metadata["matches"]])
      .toEqual(["grep", { pattern: "x", include: "*.md" }, 7])
    const read = completed({ tool: "Read", input: { file_path: "/w/a.ts", offset: 10, limit: 5 } }, "…")
    expect([read.tool, read.state.input]).toEqual(["read", { filePath: "/w/a.ts", offset: 10, limit: 5 }])
    const write = completed({ tool: "Write", input: { file_path: "/w/b.ts", content: "x" } }, "ok")
    expect([write.tool, write.state.input, write.state.status === "completed" && write.state.metadata["diagnostics"]])
      .toEqual(["write", { filePath: "/w/b.ts", content: "x" }, {}])
    const list = [{ content: "Plan", status: "in_progress", activeForm: "Planning" }]
    const todo = completed({ tool: "TodoWrite", input: { todos: list } }, "ok")
    expect([todo.tool, todo.state.input, todo.state.status === "completed" && todo.state.metadata["todos"]])
      .toEqual(["todowrite", { todos: list }, list])
    expect(NativeTools.name("WebFetch")).toBe("webfetch")
    expect(NativeTools.name("Task")).toBe("task")
    expect([NativeTools.name("Skill"), NativeTools.input("Skill", { skill: "review" })]).toEqual(["skill", { name: "review" }])
  })

  it("shows AskUserQuestion as opencode's question, each question's answer as the list its view shows", () => {
    const questions = [
      { question: "Which color?", header: "Color", options: [{ label: "Blue", description: "cool" }], multiSelect: false },
      { question: "Which size?", header: "Size", options: [] }
    ]
    const part = completed({ tool: "AskUserQuestion", input: { questions } }, "answered", {
      questions,
      answers: { "Which color?": "Blue" }
    })
    expect(part.tool).toBe("question")
    expect(part.state.input).toEqual({
      questions: [
        { question: "Which color?", header: "Color", options: [{ label: "Blue", description: "cool" }], multiple: false },
        { question: "Which size?", header: "Size", options: [] }
      ]
    })
    expect(part.state.status === "completed" && part.state.metadata["answers"]).toEqual([["Blue"], []])
  })

  it("leaves a tool opencode lacks as the CLI named it, with no part metadata", () => {
    const cli = { tool: "mcp__notes__add", input: { text: "hi" } }
    const part = completed(cli, "added")
    expect([part.tool, part.state.input, part.metadata]).toEqual(["mcp__notes__add", { text: "hi" }, undefined])
    expect(NativeTools.cliOf(part)).toEqual(cli)
    // ExitPlanMode stays: opencode's plan_exit would switch the client's agent.
    expect(NativeTools.name("ExitPlanMode")).toBe("ExitPlanMode")
  })

  it("asks permission under opencode's names: every file change as edit, with its path", () => {
    const edit = { file_path: "/w/notes.txt", old_string: "beta", new_string: "gamma" }
    expect([NativeTools.permission("Edit"), NativeTools.permissionMetadata("Edit", edit)])
      .toEqual(["edit", { ...edit, filepath: "/w/notes.txt", cli: { tool: "Edit", input: edit } }])
    const write = { file_path: "/w/new.txt", content: "x" }
    expect([NativeTools.permission("Write"), NativeTools.permissionMetadata("Write", write)["filepath"]]).toEqual(["edit", "/w/new.txt"])
    const notebook = { notebook_path: "/w/a.ipynb", new_source: "1" }
    expect([NativeTools.permission("NotebookEdit"), NativeTools.permissionMetadata("NotebookEdit", notebook)["filepath"]])
      .toEqual(["edit", "/w/a.ipynb"])
    expect([NativeTools.permission("Bash"), NativeTools.permission("WebFetch"), NativeTools.permission("Task")]).toEqual(["bash", "webfetch", "task"])
    // A tool opencode lacks asks under its own name, its metadata the CLI's input as it was.
    expect([NativeTools.permission("mcp__notes__add"), NativeTools.permissionMetadata("mcp__notes__add", { text: "hi" })])
      .toEqual(["mcp__notes__add", { text: "hi" }])
  })

  it("serves the todo list from the CLI's TodoWrite call behind a todowrite part", () => {
    const part = completed({ tool: "TodoWrite", input: { todos: [{ content: "Plan", status: "pending" }] } }, "ok")
    const info: Canonical.UserMessage = {
      id: "msg_1",
      sessionID: "ses_1",
      role: "user",
      time: { created: 1 },
      agent: "build",
      model: { providerID: "anthropic", modelID: "m" }
    }
    expect(todos([{ info, parts: [part] }])).toEqual([{ content: "Plan", status: "pending", priority: "medium" }])
  })
})
