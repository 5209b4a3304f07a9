/**
 * `GET /session/:id/todo`: the CLI keeps its todo list in `TodoWrite` tool
 * calls, each replacing the whole list, so the list is the last call's input.
 * Claude Code's items have no priority: they are served as `medium`.
 */
import type * as History from "./History.js"
import * as NativeTools from "./internal/nativeTools.js"

export interface Todo {
  readonly content: string
  readonly status: string
  readonly priority: string
}

const todoOf = (item: unknown): ReadonlyArray<Todo> => {
  if (typeof item !== "object" || item === null || !("content" in item)) return []
  const status = "status" in item ? String(item.status) : "pending"
  const priority = "priority" in item ? String(item.priority) : "medium"
  return [{ content: String(item.content), status, priority }]
}

/** The list of the last `TodoWrite` call in the history: the CLI replaces the whole list on each call. */
export const todos = (messages: ReadonlyArray<History.WithParts>): ReadonlyArray<Todo> => {
  for (const message of [...messages].reverse()) {
    for (const part of [...message.parts].reverse()) {
      if (part.type !== "tool") continue
      const cli = NativeTools.cliOf(part)
      if (cli.tool !== "TodoWrite") continue
      const list = cli.input["todos"]
      if (Array.isArray(list)) return list.flatMap(todoOf)
    }
  }
  return []
}
