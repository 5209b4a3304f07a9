/**
 * The turn boundaries of a Claude Code session as a pure state machine.
 *
 * `Session` runs it over the live bus; anything else that sees the same
 * messages (a capture, an event log) can run it too and finds the same turns.
 */
export {
  type ActiveTurn,
  defaults,
  type EndReason,
  initial,
  type Input,
  type Options,
  type Origin,
  type Output,
  type Phase,
  run,
  type Settings,
  type State,
  step,
  type Timer
} from "./internal/turnTracker.js"
