/**
 * Where turns begin and end, as a pure state machine: `(state, input) →
 * (state, outputs)`. It owns every rule about the CLI's turn boundaries, so
 * each rule can be tested over any sequence of inputs without a process.
 *
 * - Host turns are written one at a time, and only while the CLI is idle and
 *   no other turn (not even one the CLI started by itself) is live.
 * - A CLI that prints `session_state_changed` ends a turn at `idle`; one that
 *   never has (the 2.0 line) ends it at `result`. The tracker learns which from
 *   the stream: the first state event switches it for good.
 * - A turn waits for the background tasks started during it, for at most
 *   `backgroundWait`; tasks of earlier turns never hold a later one. When one
 *   of its tasks ends while the CLI is idle, it waits `followUpSettle` for the
 *   follow-up the task's notification starts.
 * - Work the CLI starts while no turn is live is a turn of its own, `cli`.
 * - An interrupted turn ends at the CLI's next end of work, whatever tasks it
 *   left running, or after `interruptSettle` if that never comes (the next
 *   host turn is still written only once the CLI is idle).
 */
import type { CliMessage } from "@skein/protocol"

export type Origin = "host" | "cli"

export type Timer = "interrupt" | "background" | "followUp"

/** Why a turn ended. */
export type EndReason =
  /** The CLI reported `idle` with none of the turn's tasks live. */
  | "idle"
  /** A CLI without state events printed `result`. */
  | "result"
  /** An interrupt was never confirmed within `interruptSettle`. */
  | "interruptSettle"
  /** The turn's own background tasks outlived `backgroundWait`. */
  | "backgroundWait"
  /** A task of the turn ended, and no follow-up came within `followUpSettle`. */
  | "followUpSettle"

export type Input =
  /** The host queued user message `turn`. */
  | { readonly _tag: "Send"; readonly turn: number }
  /** A decoded stdout message, in order. */
  | { readonly _tag: "Message"; readonly message: CliMessage.CliMessage }
  /** The host asked the CLI to interrupt the live turn. */
  | { readonly _tag: "Interrupt" }
  /** A timer the tracker set has fired; `serial` names the turn it was set for. */
  | { readonly _tag: "TimerFired"; readonly timer: Timer; readonly serial: number }
  /** The CLI is gone: nothing starts or ends any more. */
  | { readonly _tag: "Exited" }

export type Output =
  /** Write host turn `turn`'s user message now. */
  | { readonly _tag: "WriteUser"; readonly turn: number }
  | { readonly _tag: "TurnStarted"; readonly turn: number; readonly origin: Origin; readonly serial: number }
  | {
    readonly _tag: "TurnEnded"
    readonly turn: number
    readonly origin: Origin
    readonly serial: number
    readonly results: ReadonlyArray<CliMessage.Result>
    readonly interrupted: boolean
    /** The turn's own background tasks still running at its end. */
    readonly liveTasks: ReadonlyArray<string>
    readonly reason: EndReason
  }
  | { readonly _tag: "SetTimer"; readonly timer: Timer; readonly serial: number; readonly millis: number }
  | { readonly _tag: "ClearTimer"; readonly timer: Timer; readonly serial: number }

/** What the CLI is doing, as it last said (or, without state events, as inferred). */
export type Phase = "idle" | "running" | "requires_action"

export interface ActiveTurn {
  readonly turn: number
  readonly origin: Origin
  /** Unique across all turns of a tracker: keys its timers. */
  readonly serial: number
  /** The CLI has shown it works on this turn (`running` or a `result`). */
  readonly started: boolean
  readonly results: ReadonlyArray<CliMessage.Result>
  /** Background tasks started during this turn and still running. */
  readonly tasks: ReadonlyArray<string>
  /** Tasks of this turn that ended while the CLI was idle: their follow-up has not begun. */
  readonly awaitingFollowUp: boolean
  readonly interrupted: boolean
  /** The CLI reached the end of its work, but the turn still waits (for tasks or a follow-up). */
  readonly cliIdle: boolean
  readonly timers: ReadonlyArray<Timer>
}

export interface Options {
  /** How long a turn waits for its own background tasks once the CLI is idle. Default 10 min. */
  readonly backgroundWaitMillis?: number | "forever" | undefined
  /** How long an interrupted turn waits for the CLI's end of work. Default 10 s. */
  readonly interruptSettleMillis?: number | undefined
  /** After a turn's task ends while idle, how long to wait for its follow-up. Default 2 s. */
  readonly followUpSettleMillis?: number | undefined
}

/** Options with their defaults filled in. */
export interface Settings {
  readonly backgroundWaitMillis: number | "forever"
  readonly interruptSettleMillis: number
  readonly followUpSettleMillis: number
}

export interface State {
  readonly options: Settings
  readonly phase: Phase
  /** Whether the CLI has ever printed `session_state_changed`. */
  readonly stateEvents: boolean
  /** Host turns sent and not yet written, oldest first. */
  readonly queue: ReadonlyArray<number>
  readonly active: ActiveTurn | undefined
  /** Every background task known to be running, whichever turn started it. */
  readonly liveTasks: ReadonlyArray<string>
  readonly cliTurns: number
  readonly serials: number
  readonly exited: boolean
}

export const defaults: Settings = {
  backgroundWaitMillis: 10 * 60 * 1000,
  interruptSettleMillis: 10_000,
  followUpSettleMillis: 2_000
}

export const initial = (options?: Options): State => ({
  options: {
    backgroundWaitMillis: options?.backgroundWaitMillis ?? defaults.backgroundWaitMillis,
    interruptSettleMillis: options?.interruptSettleMillis ?? defaults.interruptSettleMillis,
    followUpSettleMillis: options?.followUpSettleMillis ?? defaults.followUpSettleMillis
  },
  phase: "idle",
  stateEvents: false,
  queue: [],
  active: undefined,
  liveTasks: [],
  cliTurns: 0,
  serials: 0,
  exited: false
})

type Step = readonly [State, ReadonlyArray<Output>]

/**
 * Most inputs (a delta, a message, a state the tracker already knows) change
 * nothing: they return the same state and this one empty list, so a step
 * that moves nothing copies nothing.
 */
const none: ReadonlyArray<Output> = []
const noTurns: ReadonlyArray<number> = []

// --- constructors ------------------------------------------------------------
// A step runs for every stdout message, so a changed state or turn is built
// field by field (one shape, no spread of the whole object), and a field that
// does not change keeps the very object it had.

const makeState = (
  state: State,
  phase: Phase,
  stateEvents: boolean,
  queue: ReadonlyArray<number>,
  active: ActiveTurn | undefined,
  liveTasks: ReadonlyArray<string>,
  cliTurns: number,
  serials: number,
  exited: boolean
): State => ({ options: state.options, phase, stateEvents, queue, active, liveTasks, cliTurns, serials, exited })

/** The state with `active` as its live turn; the same object when it already is. */
const withActive = (state: State, active: ActiveTurn | undefined): State =>
  active === state.active
    ? state
    : makeState(
      state,
      state.phase,
      state.stateEvents,
      state.queue,
      active,
      state.liveTasks,
      state.cliTurns,
      state.serials,
      state.exited
    )

const makeTurn = (
  turn: ActiveTurn,
  started: boolean,
  results: ReadonlyArray<CliMessage.Result>,
  tasks: ReadonlyArray<string>,
  awaitingFollowUp: boolean,
  interrupted: boolean,
  cliIdle: boolean,
  timers: ReadonlyArray<Timer>
): ActiveTurn => ({
  turn: turn.turn,
  origin: turn.origin,
  serial: turn.serial,
  started,
  results,
  tasks,
  awaitingFollowUp,
  interrupted,
  cliIdle,
  timers
})

/** The turn with other timers; the same object when they are the same. */
const withTimers = (turn: ActiveTurn, timers: ReadonlyArray<Timer>): ActiveTurn =>
  timers === turn.timers
    ? turn
    : makeTurn(
      turn,
      turn.started,
      turn.results,
      turn.tasks,
      turn.awaitingFollowUp,
      turn.interrupted,
      turn.cliIdle,
      timers
    )

/** `timers` without `timer`; the same array when it is not there. */
const without = (timers: ReadonlyArray<Timer>, timer: Timer): ReadonlyArray<Timer> =>
  timers.includes(timer) ? timers.filter((t) => t !== timer) : timers

export const step = (state: State, input: Input): Step => {
  if (state.exited) return [state, none]
  switch (input._tag) {
    case "Send":
      return pump(
        makeState(
          state,
          state.phase,
          state.stateEvents,
          [...state.queue, input.turn],
          state.active,
          state.liveTasks,
          state.cliTurns,
          state.serials,
          state.exited
        ),
        none
      )
    case "Message":
      return onMessage(state, input.message)
    case "Interrupt":
      return onInterrupt(state)
    case "TimerFired":
      return onTimer(state, input.timer, input.serial)
    case "Exited":
      return [
        makeState(
          state,
          state.phase,
          state.stateEvents,
          noTurns,
          state.active,
          state.liveTasks,
          state.cliTurns,
          state.serials,
          true
        ),
        clearTimers(state.active)
      ]
  }
}

/** Feeds inputs in order; handy for tests and for translating a capture. */
export const run = (state: State, inputs: Iterable<Input>): Step => {
  let current = state
  const outputs: Array<Output> = []
  for (const input of inputs) {
    const [next, out] = step(current, input)
    current = next
    outputs.push(...out)
  }
  return [current, outputs]
}

// --- starting turns ----------------------------------------------------------

/** Writes the next queued host turn when nothing is live and the CLI is idle. */
const pump = (state: State, outputs: ReadonlyArray<Output>): Step => {
  const next = state.queue[0]
  if (next === undefined || state.active !== undefined || state.phase !== "idle") return [state, outputs]
  const active = newTurn(next, "host", state.serials + 1)
  return [
    makeState(
      state,
      state.phase,
      state.stateEvents,
      state.queue.slice(1),
      active,
      state.liveTasks,
      state.cliTurns,
      active.serial,
      state.exited
    ),
    [...outputs, { _tag: "WriteUser", turn: next }, started(active)]
  ]
}

const newTurn = (turn: number, origin: Origin, serial: number): ActiveTurn => ({
  turn,
  origin,
  serial,
  started: origin === "cli",
  results: [],
  tasks: [],
  awaitingFollowUp: false,
  interrupted: false,
  cliIdle: false,
  timers: []
})

const started = (turn: ActiveTurn): Output => ({
  _tag: "TurnStarted",
  turn: turn.turn,
  origin: turn.origin,
  serial: turn.serial
})

/** Work the CLI began while no turn was live becomes a turn of its own. */
const ensureActive = (state: State): Step => {
  if (state.active !== undefined) return [state, none]
  const active = newTurn(state.cliTurns + 1, "cli", state.serials + 1)
  return [
    makeState(
      state,
      state.phase,
      state.stateEvents,
      state.queue,
      active,
      state.liveTasks,
      active.turn,
      active.serial,
      state.exited
    ),
    [started(active)]
  ]
}

// --- messages ----------------------------------------------------------------

const onMessage = (state: State, message: CliMessage.CliMessage): Step => {
  switch (message.type) {
    case "result":
      return onResult(state, message)
    case "system":
      return onSystem(state, message)
    case "assistant":
    case "user":
    case "stream_event":
      // Without state events, output with no live turn is work the CLI began by itself.
      if (state.stateEvents || (state.phase === "running" && state.active !== undefined)) return [state, none]
      return ensureActive(phased(state, "running", false))
    default:
      return [state, none]
  }
}

/** The state with this phase and state-event flag; the same object when both are already so. */
const phased = (state: State, phase: Phase, stateEvents: boolean): State =>
  state.phase === phase && state.stateEvents === stateEvents
    ? state
    : makeState(
      state,
      phase,
      stateEvents,
      state.queue,
      state.active,
      state.liveTasks,
      state.cliTurns,
      state.serials,
      state.exited
    )

/** The state with the CLI's phase as a state event reported it; the same object when nothing changes. */
const withPhase = (state: State, phase: Phase): State => phased(state, phase, true)

const onSystem = (state: State, message: CliMessage.SystemMessage): Step => {
  switch (message.subtype) {
    case "session_state_changed":
      return message.state === "idle"
        ? onIdle(withPhase(state, "idle"))
        : message.state === "running" || message.state === "requires_action"
        ? onBusy(withPhase(state, message.state))
        : [phased(state, state.phase, true), none]
    case "task_started":
      return message.is_backgrounded === false ? [state, none] : taskStarted(state, message.task_id)
    case "task_updated": {
      const status = message.patch.status
      return status === "completed" || status === "failed" || status === "killed" || status === "stopped"
        ? tasksEnded(state, [message.task_id])
        : [state, none]
    }
    case "task_notification":
      return tasksEnded(state, [message.task_id])
    case "background_tasks_changed":
      return tasksChanged(state, message.tasks)
    default:
      return [state, none]
  }
}

/** The full list of running tasks: whatever is missing from it has ended, whatever is new has started. */
const tasksChanged = (state: State, tasks: ReadonlyArray<{ readonly task_id: string }>): Step => {
  const now = new Set(tasks.map((t) => t.task_id))
  const known = state.liveTasks.filter((id) => !now.has(id))
  const fresh = [...now].filter((id) => !state.liveTasks.includes(id))
  if (known.length === 0 && fresh.length === 0) return [state, none]
  const [afterEnd, out] = tasksEnded(state, known)
  return [fresh.reduce((s, id) => taskStarted(s, id)[0], afterEnd), out]
}

const onBusy = (state: State): Step => {
  const [withTurn, out] = ensureActive(state)
  const active = withTurn.active
  if (active === undefined) return [withTurn, out]
  // Still busy on a turn already under way: nothing to change.
  if (active.started && !active.cliIdle && !active.awaitingFollowUp && !active.timers.includes("followUp")) return [withTurn, out]
  // A follow-up began: whatever settle timer waited for it is done.
  const hadFollowUp = active.timers.includes("followUp")
  const next = withActive(
    withTurn,
    makeTurn(active, true, active.results, active.tasks, false, active.interrupted, false, without(active.timers, "followUp"))
  )
  return [next, hadFollowUp ? [...out, clear(active, "followUp")] : out]
}

const onIdle = (state: State): Step => {
  const active = state.active
  // An idle before the turn began is the end of earlier work, not of this turn.
  if (active === undefined || !active.started) return pump(state, none)
  return settle(state, idled(active), "idle")
}

/** The turn with the CLI at the end of its work on it. */
const idled = (turn: ActiveTurn): ActiveTurn =>
  turn.cliIdle
    ? turn
    : makeTurn(turn, turn.started, turn.results, turn.tasks, turn.awaitingFollowUp, turn.interrupted, true, turn.timers)

const onResult = (state: State, result: CliMessage.Result): Step => {
  const [withTurn, out] = state.stateEvents ? [state, none] as const : ensureActive(state)
  const active = withTurn.active
  if (active === undefined) return [withTurn, out]
  // With state events the result only records; without them it is also the CLI's end of work.
  const results = [...active.results, result]
  const recorded = makeTurn(
    active,
    true,
    results,
    active.tasks,
    active.awaitingFollowUp,
    active.interrupted,
    withTurn.stateEvents ? active.cliIdle : true,
    active.timers
  )
  if (withTurn.stateEvents) return [withActive(withTurn, recorded), out]
  const [ended, more] = settle(phased(withTurn, "idle", false), recorded, "result")
  return [ended, out.length === 0 ? more : more.length === 0 ? out : [...out, ...more]]
}

// --- background tasks --------------------------------------------------------

const taskStarted = (state: State, taskId: string): Step => {
  if (state.liveTasks.includes(taskId)) return [state, none]
  const active = state.active
  const next = active === undefined || active.interrupted
    ? active
    : makeTurn(
      active,
      active.started,
      active.results,
      [...active.tasks, taskId],
      active.awaitingFollowUp,
      active.interrupted,
      active.cliIdle,
      active.timers
    )
  return [
    makeState(
      state,
      state.phase,
      state.stateEvents,
      state.queue,
      next,
      [...state.liveTasks, taskId],
      state.cliTurns,
      state.serials,
      state.exited
    ),
    none
  ]
}

const tasksEnded = (state: State, taskIds: ReadonlyArray<string>): Step => {
  const ended = taskIds.filter((id) => state.liveTasks.includes(id))
  if (ended.length === 0) return [state, none]
  const liveTasks = state.liveTasks.filter((id) => !ended.includes(id))
  const active = state.active
  const remaining = makeState(
    state,
    state.phase,
    state.stateEvents,
    state.queue,
    active,
    liveTasks,
    state.cliTurns,
    state.serials,
    state.exited
  )
  if (active === undefined || !active.tasks.some((id) => ended.includes(id))) return [remaining, none]
  const next = makeTurn(
    active,
    active.started,
    active.results,
    active.tasks.filter((id) => !ended.includes(id)),
    active.awaitingFollowUp || active.cliIdle,
    active.interrupted,
    active.cliIdle,
    active.timers
  )
  return active.cliIdle ? settle(remaining, next, "idle") : [withActive(remaining, next), none]
}

// --- ending turns --------------------------------------------------------------

/**
 * The CLI is at the end of its work on `active` (the live turn, updated): end
 * it, or wait for what it still waits for (its tasks, a follow-up), setting
 * the timer that bounds the wait.
 */
const settle = (state: State, active: ActiveTurn, reason: EndReason): Step => {
  if (active.interrupted) return end(state, active, reason)
  if (active.tasks.length > 0) {
    const wait = state.options.backgroundWaitMillis
    if (wait === "forever" || active.timers.includes("background")) return [withActive(state, active), none]
    return withTimer(state, active, "background", wait)
  }
  // None of its tasks is left: the bound on waiting for them goes too.
  const hadBackground = active.timers.includes("background")
  const turn = hadBackground ? withTimers(active, without(active.timers, "background")) : active
  const cleared = hadBackground ? [clear(active, "background")] : none
  if (!turn.awaitingFollowUp) return end(state, turn, reason)
  if (turn.timers.includes("followUp")) return [withActive(state, turn), cleared]
  const [next, set] = withTimer(state, turn, "followUp", state.options.followUpSettleMillis)
  return [next, cleared.length === 0 ? set : [...cleared, ...set]]
}

const withTimer = (state: State, active: ActiveTurn, timer: Timer, millis: number): Step => [
  withActive(state, withTimers(active, [...active.timers, timer])),
  [{ _tag: "SetTimer", timer, serial: active.serial, millis }]
]

const clear = (turn: ActiveTurn, timer: Timer): Output => ({ _tag: "ClearTimer", timer, serial: turn.serial })

const clearTimers = (turn: ActiveTurn | undefined): ReadonlyArray<Output> =>
  turn === undefined || turn.timers.length === 0 ? none : turn.timers.map((t) => clear(turn, t))

const end = (state: State, active: ActiveTurn, reason: EndReason): Step => {
  const ended: Output = {
    _tag: "TurnEnded",
    turn: active.turn,
    origin: active.origin,
    serial: active.serial,
    results: active.results,
    interrupted: active.interrupted,
    liveTasks: active.tasks,
    reason
  }
  const timers = clearTimers(active)
  return pump(withActive(state, undefined), timers.length === 0 ? [ended] : [...timers, ended])
}

// --- interrupt and timers ------------------------------------------------------

const onInterrupt = (state: State): Step => {
  const active = state.active
  if (active === undefined || active.interrupted) return [state, none]
  const interrupted = makeTurn(
    active,
    active.started,
    active.results,
    active.tasks,
    active.awaitingFollowUp,
    true,
    active.cliIdle,
    active.timers
  )
  // Already at the end of its work, waiting only for tasks or a follow-up: end now.
  if (active.cliIdle) return end(state, interrupted, "idle")
  return withTimer(state, interrupted, "interrupt", state.options.interruptSettleMillis)
}

const onTimer = (state: State, timer: Timer, serial: number): Step => {
  const active = state.active
  if (active === undefined || active.serial !== serial || !active.timers.includes(timer)) return [state, none]
  const fired = withTimers(active, without(active.timers, timer))
  switch (timer) {
    case "interrupt":
      // The turn resolves, but the CLI has not said it stopped: the next turn still waits for its idle.
      return end(state, fired, "interruptSettle")
    case "background":
      return end(state, fired, "backgroundWait")
    case "followUp":
      return active.cliIdle ? end(state, fired, "followUpSettle") : [withActive(state, fired), none]
  }
}
