/**
 * Mirrors the CLI's background tasks into the host's TaskManager, when one is
 * provided, so that `skein tasks` and the runtime's own task views see them.
 */
import { Task, type TaskManager } from "@skein/kernel"
import type { CliMessage } from "@skein/protocol"
import { Effect, Schema } from "effect"

const isTaskType = Schema.is(Task.TaskType)

export const mirror = (tasks: TaskManager.TaskManager["Type"], message: CliMessage.SystemMessage): Effect.Effect<void> => {
  switch (message.subtype) {
    case "task_started": {
      const type = message.task_type ?? "local_agent"
      if (!isTaskType(type)) return Effect.void
      return tasks.track(message.task_id, type, message.description, {
        status: "running",
        ...(message.tool_use_id === undefined ? {} : { toolUseId: message.tool_use_id })
      }).pipe(Effect.ignore)
    }
    case "task_updated": {
      const status = message.patch.status
      if (status !== "completed" && status !== "failed" && status !== "killed") return Effect.void
      return tasks.update(message.task_id, { status }).pipe(Effect.ignore)
    }
    default:
      return Effect.void
  }
}
