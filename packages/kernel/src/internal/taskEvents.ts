/**
 * The events a TaskManager publishes, shaped like the CLI's own `task_*`
 * system messages, and the summary a notice carries. Pure.
 */
import * as Task from "../Task.js"
import type { ProgressOptions } from "../TaskManager.js"

const firstLine = (text: string): string => text.split("\n", 1)[0] ?? ""

/** The task's own summary, else one line saying how it ended. */
export const summaryOf = (record: Task.TaskRecord): string => {
  if (record.summary !== undefined) return record.summary
  const name = `Task "${record.description}"`
  switch (record.status) {
    case "completed":
      return `${name} completed`
    case "failed":
      return `${name} failed: ${firstLine(record.error ?? "unknown error")}`
    case "killed":
      return `${name} was stopped`
    case "interrupted":
      return `${name} was interrupted: the runtime stopped while it ran`
    default:
      return `${name} is ${record.status}`
  }
}

export const started = (record: Task.TaskRecord): Task.TaskStarted => ({
  type: "system",
  subtype: "task_started",
  task_id: record.id,
  description: record.description,
  task_type: record.type,
  tool_use_id: record.toolUseId,
  parent_task_id: record.parentTaskId
})

export const updated = (id: string, patch: Task.TaskUpdated["patch"]): Task.TaskUpdated => ({
  type: "system",
  subtype: "task_updated",
  task_id: id,
  patch
})

export const notification = (record: Task.TaskRecord): Task.TaskNotification => ({
  type: "system",
  subtype: "task_notification",
  task_id: record.id,
  tool_use_id: record.toolUseId,
  status: Task.noticeStatus(record.status),
  output_file: record.outputFile,
  summary: summaryOf(record)
})

/** Progress at `now`: the duration counts from the start, or from creation if it never started. */
export const progress = (record: Task.TaskRecord, now: number, options: ProgressOptions = {}): Task.TaskProgress => ({
  type: "system",
  subtype: "task_progress",
  task_id: record.id,
  tool_use_id: record.toolUseId,
  description: record.description,
  usage: {
    total_tokens: options.totalTokens ?? 0,
    tool_uses: options.toolUses ?? 0,
    duration_ms: Math.max(0, now - (record.startedAt ?? record.createdAt))
  },
  last_tool_name: options.lastToolName,
  summary: options.summary
})
