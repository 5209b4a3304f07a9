/**
 * Turn boundaries as the session (or the turn tracker over a capture)
 * reports them: busy at the start, idle then `session.idle` at the
 * authoritative end, each exactly once per turn. An interrupted turn, or the
 * end of the input, closes what is still open: text and reasoning parts get
 * `time.end`, tools end in `error` ("interrupted"), the step gets its finish.
 */
import { Canonical } from "@skein/protocol"
import { closeBlock, finishAssistant, flushCompaction, partUpdated } from "./messages.js"
import * as NativeTools from "./nativeTools.js"
import { showQueued } from "./prompts.js"
import type { Events, State } from "./state.js"
import { update } from "./state.js"

export const onTurnStarted = (state: State, events: Events): State => {
  if (state.busy) return state
  events.push(Canonical.event("session.status", { sessionID: state.sessionID, status: { type: "busy" } }))
  return update(state, { busy: true })
}

/** Closes every open part: the open message's blocks and step, then tools still waiting for results. */
export const closeOpen = (state: State, events: Events, reason: string): State => {
  let next = flushCompaction(state, events)
  const message = next.message
  if (message !== undefined) {
    for (const block of message.blocks) {
      if (!block.closed) next = closeBlock(next, events, block.index)
    }
    next = finishAssistant(next, events)
  }
  for (const [callID, tool] of next.tools) {
    events.push(partUpdated(
      next,
      NativeTools.toolPart(
        { id: tool.partID, sessionID: next.sessionID, messageID: tool.messageID, callID },
        tool,
        (input) => ({ status: "error", input, error: reason, time: { start: tool.start, end: Math.max(next.clock, tool.start) } })
      )
    ))
  }
  return update(next, { tools: new Map(), pendingRetries: [] })
}

/**
 * The authoritative end. Nothing of the turn can still arrive: a step the CLI
 * never closed is closed, and a tool with no result by now never gets one.
 */
export const onTurnEnded = (state: State, events: Events, options: { readonly interrupted: boolean }): State => {
  const interrupted = options.interrupted || state.aborted
  const marked = interrupted ? update(state, { interrupted: true }) : state
  const next = update(closeOpen(marked, events, interrupted ? "interrupted" : "the turn ended without a tool result"), {
    aborted: false,
    interrupted: false
  })
  if (!next.busy) return next
  events.push(Canonical.event("session.status", { sessionID: next.sessionID, status: { type: "idle" } }))
  events.push(Canonical.event("session.idle", { sessionID: next.sessionID }))
  return showQueued(update(next, { busy: false }), events)
}

/** The input ended (the CLI exited, or a capture ran out): close everything as an interrupt would. */
export const onEnd = (state: State, events: Events): State => {
  const closed = closeOpen(state, events, "interrupted")
  return closed.busy ? onTurnEnded(closed, events, { interrupted: false }) : closed
}
