/**
 * `system` messages, by subtype, and `result`. Subtypes this release line
 * does not model (they decode as `Unknown`) are read by their fields, so a
 * `microcompact_boundary` or `stop_hook_summary` still maps; everything else
 * is kept as `session.cli_event` by the caller.
 */
import type { CliMessage } from "@skein/protocol"
import { Canonical } from "@skein/protocol"
import { finishAssistant, flushCompaction } from "./messages.js"
import type { Events, State, TaskSeen } from "./state.js"
import { field, numberField, stringField, update } from "./state.js"

const taskStatus = (status: string): Canonical.TaskStatus =>
  status === "completed" ? "completed" : status === "killed" || status === "stopped" ? "stopped" : "failed"

/** The statuses a task does not leave (2.1.332's `task_updated` says `completed`, `failed` or `killed`). */
const terminal = new Set(["completed", "failed", "killed", "stopped"])

const noUsage: Canonical.TaskUsage = { total_tokens: 0, tool_uses: 0, duration_ms: 0 }

const seen = (state: State, taskID: string): TaskSeen =>
  state.tasks.get(taskID) ?? { description: "", toolUseID: undefined, usage: noUsage, completed: false }

const withTask = (state: State, taskID: string, task: TaskSeen): State => update(state, { tasks: new Map(state.tasks).set(taskID, task) })

/**
 * `task_updated`: a patch of what changed. A status on its way is a
 * `task.progress`; a terminal one is the task's `task.completed`, unless its
 * `task_notification` already gave one. On 2.1.332 the patch comes first (a
 * killed task: `killed`, then a notification `stopped`); the notification's
 * own `task.completed` then follows and refines it with the summary and the
 * output file (clients key tasks by `taskID`).
 */
const onTaskUpdated = (state: State, events: Events, message: CliMessage.TaskUpdated): State => {
  const before = seen(state, message.task_id)
  const task = { ...before, description: message.patch.description ?? before.description }
  const status = message.patch.status
  if (status === undefined || task.completed) return withTask(state, message.task_id, task)
  if (!terminal.has(status)) {
    events.push(Canonical.event("task.progress", {
      sessionID: state.sessionID,
      taskID: message.task_id,
      description: task.description,
      usage: task.usage,
      summary: status
    }))
    return withTask(state, message.task_id, task)
  }
  events.push(Canonical.event("task.completed", {
    sessionID: state.sessionID,
    taskID: message.task_id,
    ...(task.toolUseID !== undefined ? { toolUseID: task.toolUseID } : {}),
    status: taskStatus(status),
    summary: message.patch.error ?? task.description,
    outputFile: ""
  }))
  return withTask(state, message.task_id, { ...task, completed: true })
}

export const sessionInfo = (state: State): Canonical.SessionInfo => {
  const host = state.options.host
  const created = host?.created ?? state.options.createdAt ?? 0
  return {
    id: state.sessionID,
    title: host?.title ?? "",
    directory: state.cwd ?? "",
    ...(host?.projectID !== undefined ? { projectID: host.projectID } : {}),
    ...(host?.parentID !== undefined ? { parentID: host.parentID } : {}),
    ...(host?.version !== undefined ? { version: host.version } : {}),
    time: {
      created,
      // Before the CLI's first stamped message its clock is 0: never older than the session.
      updated: host?.created !== undefined ? Math.max(state.clock, created) : state.clock,
      ...(state.compacting ? { compacting: state.clock } : {})
    },
    ...(state.model !== undefined ? { model: { providerID: "anthropic", modelID: state.model } } : {}),
    ...(state.permissionMode !== undefined ? { permissionMode: state.permissionMode } : {})
  }
}

const statusText: Readonly<Record<number, string>> = {
  429: "Rate limited",
  500: "Internal server error",
  502: "Bad gateway",
  503: "Service unavailable",
  504: "Gateway timeout",
  529: "Overloaded"
}

/** One wording for a retried error, whether it came from stdout (`api_retry`) or a transcript (`api_error`). */
export const retryError = (status: number | null | undefined, fallback: string): Canonical.ErrorInfo => ({
  name: "APIError",
  data: {
    message: status == null ? fallback : `${status} ${statusText[status] ?? fallback}`,
    ...(status == null ? {} : { statusCode: status }),
    isRetryable: true
  }
})

export const onRetry = (
  state: State,
  events: Events,
  retry: { readonly attempt: number; readonly delayMs: number; readonly error: Canonical.ErrorInfo; readonly now: number }
): State => {
  events.push(Canonical.event("session.status", {
    sessionID: state.sessionID,
    status: {
      type: "retry",
      attempt: retry.attempt,
      message: retry.error.data.message ?? "retrying",
      next: retry.now + retry.delayMs
    }
  }))
  return update(state, { pendingRetries: [...state.pendingRetries, { attempt: retry.attempt, error: retry.error, created: state.clock }] })
}

/**
 * A compaction boundary. After a `compact_boundary` its message waits for the
 * summary's timestamp (`flushCompaction`); a microcompaction has no summary.
 */
export const onCompaction = (
  state: State,
  events: Events,
  boundary: { readonly uuid: string; readonly auto: boolean; readonly summaryFollows: boolean }
): State => {
  const open = flushCompaction(state.message === undefined ? state : finishAssistant(state, events), events)
  const pending = update(open, { pendingCompaction: { uuid: boundary.uuid, auto: boundary.auto }, compacting: false })
  return boundary.summaryFollows ? pending : flushCompaction(pending, events)
}

export const onSystem = (state: State, events: Events, message: CliMessage.SystemMessage, now: number): State => {
  const sessionID = state.sessionID
  switch (message.subtype) {
    case "init": {
      const next = update(state, { model: message.model, permissionMode: message.permissionMode, cwd: state.options.cwd ?? message.cwd })
      events.push(Canonical.event("session.updated", { info: sessionInfo(next) }))
      return next
    }
    case "status": {
      const next = update(state, {
        compacting: message.status === "compacting",
        permissionMode: message.permissionMode ?? state.permissionMode
      })
      events.push(Canonical.event("session.updated", { info: sessionInfo(next) }))
      if (message.compact_error !== undefined) {
        events.push(Canonical.event("session.error", {
          sessionID,
          error: { name: "UnknownError", data: { message: `compaction failed: ${message.compact_error}` } }
        }))
      }
      return next
    }
    case "compact_boundary":
      return onCompaction(state, events, { uuid: message.uuid, auto: message.compact_metadata.trigger === "auto", summaryFollows: true })
    case "api_retry":
      return onRetry(state, events, {
        attempt: message.attempt,
        delayMs: message.retry_delay_ms,
        error: retryError(message.error_status, typeof message.error === "string" ? message.error : "API error"),
        now
      })
    case "task_started":
      events.push(Canonical.event("task.started", {
        sessionID,
        taskID: message.task_id,
        ...(message.tool_use_id !== undefined ? { toolUseID: message.tool_use_id } : {}),
        description: message.description,
        ...(message.task_type !== undefined ? { taskType: message.task_type } : {}),
        ...(message.prompt !== undefined ? { prompt: message.prompt } : {})
      }))
      return withTask(state, message.task_id, { ...seen(state, message.task_id), description: message.description, toolUseID: message.tool_use_id })
    case "task_progress":
      events.push(Canonical.event("task.progress", {
        sessionID,
        taskID: message.task_id,
        description: message.description,
        usage: message.usage,
        ...(message.last_tool_name !== undefined ? { lastToolName: message.last_tool_name } : {}),
        ...(message.summary !== undefined ? { summary: message.summary } : {})
      }))
      return withTask(state, message.task_id, { ...seen(state, message.task_id), description: message.description, usage: message.usage })
    case "task_updated":
      return onTaskUpdated(state, events, message)
    case "task_notification":
      events.push(Canonical.event("task.completed", {
        sessionID,
        taskID: message.task_id,
        ...(message.tool_use_id !== undefined ? { toolUseID: message.tool_use_id } : {}),
        status: taskStatus(message.status),
        summary: message.summary,
        outputFile: message.output_file,
        ...(message.usage !== undefined ? { usage: message.usage } : {})
      }))
      return withTask(state, message.task_id, { ...seen(state, message.task_id), completed: true })
    case "hook_started":
    case "hook_progress":
    case "hook_response":
      events.push(Canonical.event("session.hook_progress", {
        sessionID,
        hookID: message.hook_id,
        hookName: message.hook_name,
        hookEvent: message.hook_event,
        phase: message.subtype === "hook_started" ? "started" : message.subtype === "hook_progress" ? "progress" : "response",
        ...(message.subtype !== "hook_started"
          ? { stdout: message.stdout, stderr: message.stderr, output: message.output }
          : {}),
        ...(message.subtype === "hook_response" && message.exit_code !== undefined ? { exitCode: message.exit_code } : {}),
        ...(message.subtype === "hook_response" ? { outcome: message.outcome } : {})
      }))
      return state
    case "informational":
      events.push(Canonical.event("session.info", {
        sessionID,
        message: message.content,
        level: message.level,
        source: "informational",
        ...(message.tool_use_id !== undefined ? { toolUseID: message.tool_use_id } : {})
      }))
      return state
    case "notification":
      events.push(Canonical.event("session.info", { sessionID, message: message.text, level: message.priority, source: "notification" }))
      return state
    case "model_refusal_fallback":
    case "model_refusal_no_fallback":
    case "mirror_error":
    case "session_writes_lost":
      events.push(Canonical.event("session.warning", {
        sessionID,
        message: "content" in message ? message.content : "error" in message ? message.error : message.error_code,
        source: message.subtype
      }))
      return state
    default:
      return state
  }
}

/** System subtypes this release's schemas do not know, read by their fields. */
export const onUnknownSystem = (state: State, events: Events, subtype: string, json: unknown, now: number): State => {
  const sessionID = state.sessionID
  switch (subtype) {
    case "microcompact_boundary":
      return onCompaction(state, events, {
        uuid: stringField(json, "uuid") ?? `microcompact-${state.clock}`,
        auto: true,
        summaryFollows: false
      })
    case "api_error": {
      const retryIn = numberField(json, "retry_in_ms") ?? numberField(json, "retryInMs")
      const attempt = numberField(json, "retry_attempt") ?? numberField(json, "retryAttempt")
      const error = field(json, "error")
      const status = numberField(error, "status") ?? numberField(json, "error_status")
      const text = stringField(error, "formatted") ?? stringField(error, "message") ?? stringField(json, "content") ?? "API error"
      if (retryIn !== undefined && attempt !== undefined) {
        return onRetry(state, events, { attempt, delayMs: retryIn, error: retryError(status, text), now })
      }
      events.push(Canonical.event("session.error", {
        sessionID,
        error: { name: "APIError", data: { message: text, ...(status !== undefined ? { statusCode: status } : {}), isRetryable: false } }
      }))
      return state
    }
    case "stop_hook_summary": {
      const label = stringField(json, "hook_label") ?? stringField(json, "hookLabel")
      const count = numberField(json, "hook_count") ?? numberField(json, "hookCount")
      const errors = field(json, "hook_errors") ?? field(json, "hookErrors")
      const prevented = field(json, "prevented_continuation") ?? field(json, "preventedContinuation")
      const duration = numberField(json, "total_duration_ms") ?? numberField(json, "totalDurationMs")
      events.push(Canonical.event("session.hook_summary", {
        sessionID,
        ...(label !== undefined ? { hookLabel: label } : {}),
        ...(count !== undefined ? { hookCount: count } : {}),
        ...(Array.isArray(errors) ? { hookErrors: errors } : {}),
        ...(typeof prevented === "boolean" ? { preventedContinuation: prevented } : {}),
        ...(duration !== undefined ? { totalDurationMs: duration } : {})
      }))
      return state
    }
    case "turn_duration": {
      const duration = numberField(json, "duration_ms") ?? numberField(json, "durationMs")
      events.push(Canonical.event("session.metrics", { sessionID, ...(duration !== undefined ? { durationMs: duration } : {}) }))
      return state
    }
    case "cache_warning":
    case "informational": {
      const type = subtype === "cache_warning" ? "session.warning" : "session.info"
      events.push(Canonical.event(type, {
        sessionID,
        message: stringField(json, "content") ?? stringField(json, "message") ?? "",
        source: subtype
      }))
      return state
    }
    default:
      return state
  }
}

export const onResult = (state: State, events: Events, result: CliMessage.Result): State => {
  const open = flushCompaction(state.message !== undefined && !state.message.streamed ? finishAssistant(state, events) : state, events)
  const sessionID = open.sessionID
  const aborted = result.terminal_reason?.startsWith("aborted") === true
  if (result.is_error) {
    const errors = "errors" in result && result.errors !== undefined ? result.errors.join("\n") : result.subtype
    events.push(Canonical.event("session.error", {
      sessionID,
      error: aborted
        ? { name: "MessageAbortedError", data: { message: "interrupted" } }
        : { name: "UnknownError", data: { message: errors, subtype: result.subtype } }
    }))
  }
  events.push(Canonical.event("session.metrics", {
    sessionID,
    durationMs: result.duration_ms,
    ...(result.duration_api_ms !== undefined ? { durationApiMs: result.duration_api_ms } : {}),
    numTurns: result.num_turns,
    cost: result.total_cost_usd,
    tokens: {
      input: result.usage.input_tokens,
      output: result.usage.output_tokens,
      reasoning: 0,
      cache: { read: result.usage.cache_read_input_tokens ?? 0, write: result.usage.cache_creation_input_tokens ?? 0 }
    }
  }))
  return aborted ? update(open, { aborted: true }) : open
}
