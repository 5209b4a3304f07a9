/**
 * Where a read of stdout goes after it is published: every event to the
 * turns, and the few that concern another unit (a control answer, a request
 * of the CLI's, `init`, a task, a tool block for the trace) to that unit too,
 * each after its own step of the turns. The events that route nowhere (every
 * delta) run together as one step of the turns: one hold of its lock for a
 * run of deltas instead of one per delta.
 */
import type { TaskManager } from "@skein/kernel"
import type { CliMessage } from "@skein/protocol"
import { Effect, Option } from "effect"
import type { SessionEvent } from "../Turn.js"
import type * as CliRequests from "./cliRequests.js"
import type * as ControlChannel from "./controlChannel.js"
import * as TaskMirror from "./taskMirror.js"
import type * as Trace from "./trace.js"

export interface Routes {
  readonly control: Pick<ControlChannel.ControlChannel, "onResponse">
  readonly requests: Pick<CliRequests.CliRequests, "onRequest" | "onCancel" | "onUnknown">
  readonly trace: Pick<Trace.SessionTrace, "onMessage">
  readonly onInit: (message: CliMessage.Init) => Effect.Effect<void>
  readonly taskManager: Option.Option<TaskManager.TaskManager["Type"]>
}

/** Where an event goes besides its turn; `Effect.void` (the very value) for most. */
export const routeOf = (routes: Routes) => (event: SessionEvent): Effect.Effect<void> => {
  if (event._tag === "Unknown") {
    return event.type === "control_request" ? routes.requests.onUnknown(event.json, event.subtype) : Effect.void
  }
  if (event._tag !== "Message") return Effect.void
  const message = event.message
  switch (message.type) {
    case "control_response":
      return routes.control.onResponse(message)
    case "control_request":
      return routes.requests.onRequest(message)
    case "control_cancel_request":
      return routes.requests.onCancel(message.request_id)
    case "system":
      if (message.subtype === "init") return routes.onInit(message)
      return Option.match(routes.taskManager, { onNone: () => Effect.void, onSome: (tasks) => TaskMirror.mirror(tasks, message) })
    case "assistant":
    case "user":
      return routes.trace.onMessage(message)
    default:
      return Effect.void
  }
}

/**
 * A read's events, in order: each is stepped by the turns (`onEvents`), then
 * routed. Runs of events that route nowhere share one step.
 */
export const make = (options: {
  readonly routeOf: (event: SessionEvent) => Effect.Effect<void>
  readonly onEvents: (events: ReadonlyArray<SessionEvent>) => Effect.Effect<void>
}) =>
(events: ReadonlyArray<SessionEvent>): Effect.Effect<void> => {
  const steps: Array<Effect.Effect<void>> = []
  let from = 0
  for (let i = 0; i < events.length; i++) {
    const routed = options.routeOf(events[i]!)
    if (routed === Effect.void) continue
    steps.push(options.onEvents(events.slice(from, i + 1)), routed)
    from = i + 1
  }
  if (from < events.length) steps.push(options.onEvents(from === 0 ? events : events.slice(from)))
  return steps.length === 1 ? steps[0]! : Effect.all(steps, { discard: true })
}
