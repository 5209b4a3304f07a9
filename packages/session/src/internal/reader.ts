/**
 * The one reader of the CLI's stdout: decode, fold into the state, append to
 * the event log, publish, then hand the events on, a read of stdout at a time.
 *
 * It races the leader's exit: a descendant that inherited stdout can keep the
 * pipe open long after the CLI is gone, so once the leader exits, stdout is
 * drained for at most `drainGrace` and the reader returns how the CLI ended.
 */
import type { ProcessHost } from "@skein/kernel"
import type { Json } from "@skein/protocol"
import type { EventLog } from "@skein/store"
import { Chunk, type Clock, type Duration, Effect, Fiber } from "effect"
import * as SessionState from "../SessionState.js"
import type { SessionEvent } from "../Turn.js"
import type * as LazyHub from "./lazyHub.js"
import type * as StateCell from "./stateCell.js"
import * as StdoutPull from "./stdoutPull.js"

export interface Options {
  readonly child: ProcessHost.ChildProcess
  /** The child's stdout, decoded (see `launch`). */
  readonly stdout: StdoutPull.Pull<SessionEvent>
  readonly state: StateCell.StateCell<SessionState.SessionState>
  /** Where every event is published: a hub made on its first subscription. */
  readonly events: Pick<LazyHub.LazyHub<SessionEvent>, "publishAll" | "subscribed">
  readonly eventLog?: EventLog.EventLog<Json.JsonObject> | undefined
  /** How an event is kept in the event log. */
  readonly record: (event: SessionEvent) => Json.JsonObject
  /** Runs after a read's events are published, with them in order: turns, control routing. */
  readonly dispatch: (events: ReadonlyArray<SessionEvent>) => Effect.Effect<void>
  readonly drainGrace: Duration.DurationInput
}

/**
 * Folds, records and publishes the events of one read of stdout, then
 * dispatches them in order. A chunk at a time, not an event at a time: in a
 * delta storm one read holds hundreds of lines, and the state update, the
 * log append and the publish each cost the same for one event as for all of
 * them. The state is folded over the whole chunk before its events are
 * published, so a subscriber never sees an event the state does not reflect.
 *
 * The fold is one synchronous step (the clock is the reader's, read once at
 * its start), and a publish no one subscribed to is skipped, not built: a
 * read whose events go only to the turns costs its dispatch and no more.
 */
const onChunk = (options: Options, clock: Clock.Clock) => (chunk: Chunk.Chunk<SessionEvent>): Effect.Effect<void> =>
  Effect.suspend(() => {
    const now = clock.unsafeCurrentTimeMillis()
    options.state.unsafeUpdate((s) => SessionState.applyAll(s, messagesOf(chunk), now))
    const events = Chunk.toReadonlyArray(chunk)
    const dispatch = options.dispatch(events)
    const publish = options.events.subscribed() ? Effect.zipRight(options.events.publishAll(chunk), dispatch) : dispatch
    if (options.eventLog === undefined) return publish
    return options.eventLog.appendAll(events.map(options.record)).pipe(
      Effect.catchAll((error) => Effect.logWarning("Session: the event log refused events", error)),
      Effect.zipRight(publish)
    )
  })

/** The messages among a chunk's events (the rest only mark the session seen). */
function* messagesOf(chunk: Chunk.Chunk<SessionEvent>) {
  for (const event of chunk) if (event._tag === "Message") yield event.message
}

/** Reads stdout until the CLI is gone; returns how it ended. */
export const run = (options: Options): Effect.Effect<ProcessHost.ExitStatus> =>
  Effect.gen(function*() {
    const clock = yield* Effect.clock
    const reading = yield* Effect.fork(StdoutPull.forEachChunk(options.stdout, onChunk(options, clock)))
    const status = yield* options.child.await
    // What the CLI printed before it exited still counts, but a pipe held open by a descendant must not hold the session.
    yield* Fiber.await(reading).pipe(Effect.timeout(options.drainGrace), Effect.ignore)
    yield* Fiber.interrupt(reading)
    yield* options.state.update((s) => ({ ...s, status: "exited" as const }))
    return status
  })
