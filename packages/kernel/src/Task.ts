/**
 * The task model: types, ids, states and the transition rules.
 *
 * Everything here is pure; the TaskManager applies it to supervised fibers
 * and to tasks the CLI runs itself.
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import type { CliMessage } from "@skein/protocol"
import * as internalId from "./internal/taskId.js"

// ---------------------------------------------------------------------------
// Types and ids
// ---------------------------------------------------------------------------

export const TaskType = Schema.Literal(
  "local_bash",
  "local_agent",
  "remote_agent",
  "in_process_teammate",
  "local_workflow",
  "monitor_mcp",
  "dream"
)
export type TaskType = Schema.Schema.Type<typeof TaskType>

/** The one-letter id prefix of each type; the CLI uses the same letters. */
export const prefixes: { readonly [T in TaskType]: string } = {
  local_bash: "b",
  local_agent: "a",
  remote_agent: "r",
  in_process_teammate: "t",
  local_workflow: "w",
  monitor_mcp: "m",
  dream: "d"
}

const typeByPrefix: ReadonlyMap<string, TaskType> = new Map(
  TaskType.literals.map((type) => [prefixes[type], type] as const)
)

/** A known prefix and 8 characters of [0-9a-z]: also safe as a file name. */
export const idPattern = /^[bartwmd][0-9a-z]{8}$/

export const TaskId = Schema.String.pipe(
  Schema.pattern(idPattern, { message: () => "a task id is a type prefix (b a r t w m d) and 8 characters of [0-9a-z]" }),
  Schema.brand("@skein/kernel/TaskId")
)
export type TaskId = Schema.Schema.Type<typeof TaskId>

/** A fresh id of the given type, from a cryptographic source with a uniform alphabet. */
export const makeId = (type: TaskType): TaskId => TaskId.make(prefixes[type] + internalId.randomSuffix(8))

/** The type an id's prefix names, if the id is well formed. */
export const typeOf = (id: string): TaskType | undefined =>
  idPattern.test(id) ? typeByPrefix.get(id.charAt(0)) : undefined

export class InvalidTaskId extends Schema.TaggedError<InvalidTaskId>()("InvalidTaskId", {
  id: Schema.String,
  reason: Schema.String
}) {}

/** Checks an id from outside (the CLI, a URL): well formed and, when given, of the expected type. */
export const parseId = (id: string, type?: TaskType): Either.Either<TaskId, InvalidTaskId> => {
  const found = typeOf(id)
  if (found === undefined) {
    return Either.left(
      new InvalidTaskId({ id, reason: "expected a type prefix (b a r t w m d) and 8 characters of [0-9a-z]" })
    )
  }
  if (type !== undefined && found !== type) {
    return Either.left(new InvalidTaskId({ id, reason: `prefix "${id.charAt(0)}" is ${found}, not ${type}` }))
  }
  return Either.right(TaskId.make(id))
}

// ---------------------------------------------------------------------------
// States
// ---------------------------------------------------------------------------

export const TaskStatus = Schema.Literal("pending", "running", "completed", "failed", "killed", "interrupted")
export type TaskStatus = Schema.Schema.Type<typeof TaskStatus>

/**
 * `interrupted` is terminal too: the fiber that ran the task is gone with the
 * process that owned it, so the task cannot go on; a retry is a new task.
 */
export const terminalStatuses: ReadonlySet<TaskStatus> = new Set(["completed", "failed", "killed", "interrupted"])

export const isTerminal = (status: TaskStatus): boolean => terminalStatuses.has(status)

const edges: { readonly [S in TaskStatus]: ReadonlyArray<TaskStatus> } = {
  pending: ["running", "failed", "killed", "interrupted"],
  running: ["completed", "failed", "killed", "interrupted"],
  completed: [],
  failed: [],
  killed: [],
  interrupted: []
}

/** The states one legal step leads to. */
export const successors = (from: TaskStatus): ReadonlyArray<TaskStatus> => edges[from]

export class IllegalTransition extends Schema.TaggedError<IllegalTransition>()("IllegalTransition", {
  id: Schema.String,
  from: TaskStatus,
  to: TaskStatus
}) {
  override get message() {
    return `task ${this.id} cannot go from ${this.from} to ${this.to}`
  }
}

/** Validates one step of the state machine. Staying in a state is not a step. */
export const transition = (
  id: string,
  from: TaskStatus,
  to: TaskStatus
): Either.Either<TaskStatus, IllegalTransition> =>
  edges[from].includes(to) ? Either.right(to) : Either.left(new IllegalTransition({ id, from, to }))

/** Every state some sequence of legal steps from `pending` reaches. */
export const reachable: ReadonlySet<TaskStatus> = (() => {
  const seen = new Set<TaskStatus>(["pending"])
  const queue: Array<TaskStatus> = ["pending"]
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    for (const to of edges[next]) {
      if (!seen.has(to)) {
        seen.add(to)
        queue.push(to)
      }
    }
  }
  return seen
})()

// ---------------------------------------------------------------------------
// The persisted record
// ---------------------------------------------------------------------------

/** `spawned`: the manager runs the task as a fiber. `tracked`: the CLI runs it; the manager mirrors it. */
export const Supervision = Schema.Literal("spawned", "tracked")
export type Supervision = Schema.Schema.Type<typeof Supervision>

const optional = Schema.optional

/** One task as written to `<root>/tasks/<id>.json`. Times are epoch milliseconds. */
export const TaskRecord = Schema.Struct({
  version: Schema.Literal(1),
  id: TaskId,
  type: TaskType,
  description: Schema.String,
  status: TaskStatus,
  supervision: Supervision,
  createdAt: Schema.Number,
  updatedAt: Schema.Number,
  startedAt: optional(Schema.Number),
  endedAt: optional(Schema.Number),
  outputFile: Schema.String,
  /** The success value, as JSON. */
  result: optional(Schema.Unknown),
  /** The failure, pretty-printed. */
  error: optional(Schema.String),
  /** `_tag` of the first typed failure, e.g. `HeartbeatTimeout`. */
  errorTag: optional(Schema.String),
  summary: optional(Schema.String),
  toolUseId: optional(Schema.String),
  parentTaskId: optional(Schema.String),
  /** Set once the completion notice went out; never cleared. */
  notified: Schema.Boolean
})
export interface TaskRecord extends Schema.Schema.Type<typeof TaskRecord> {}

/** Decodes a record file's text. */
export const decodeRecordJson = Schema.decodeUnknownEither(Schema.parseJson(TaskRecord))
/** Encodes a record to the text of its file. */
export const encodeRecordJson = Schema.encodeEither(Schema.parseJson(TaskRecord, { space: 2 }))

/** A change the session layer mirrors from the CLI's `task_updated`. */
export interface TaskPatch {
  readonly status?: TaskStatus | undefined
  readonly description?: string | undefined
  readonly error?: string | undefined
  readonly summary?: string | undefined
}

// ---------------------------------------------------------------------------
// Failures of running tasks
// ---------------------------------------------------------------------------

export class HeartbeatTimeout extends Schema.TaggedError<HeartbeatTimeout>()("HeartbeatTimeout", {
  id: Schema.String,
  timeoutMillis: Schema.Number
}) {
  override get message() {
    return `task ${this.id} sent no heartbeat for ${this.timeoutMillis} ms`
  }
}

// ---------------------------------------------------------------------------
// Events: the CLI's own task messages without the session stamp
// ---------------------------------------------------------------------------

type Unstamped<A> = Omit<A, "uuid" | "session_id">

export type TaskStarted = Unstamped<CliMessage.TaskStarted>
export type TaskProgress = Unstamped<CliMessage.TaskProgress>
export type TaskUpdated = Unstamped<CliMessage.TaskUpdated>
export type TaskNotification = Unstamped<CliMessage.TaskNotification>

/** What the manager publishes; the serve layer maps these like the CLI's messages. */
export type TaskEvent = TaskStarted | TaskProgress | TaskUpdated | TaskNotification

/** The status a notice reports, in the CLI's words. */
export const noticeStatus = (status: TaskStatus): "completed" | "failed" | "stopped" => {
  switch (status) {
    case "completed":
      return "completed"
    case "killed":
      return "stopped"
    default:
      return "failed"
  }
}
