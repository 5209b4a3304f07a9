/**
 * @skein/session: the Claude Code session actor and its control protocol.
 */
export * as Session from "./Session.js"
export * as SupervisedSession from "./SupervisedSession.js"
export * as SessionError from "./SessionError.js"
export * as SessionState from "./SessionState.js"
export * as Turn from "./Turn.js"
export * as TurnTracker from "./TurnTracker.js"
export * as Permissions from "./Permissions.js"
export * as Hooks from "./Hooks.js"
export * as Elicitation from "./Elicitation.js"
export * as Worker from "./Worker.js"
export * as Tool from "./Tool.js"
export * as Toolkit from "./Toolkit.js"
export * as SessionPool from "./SessionPool.js"
