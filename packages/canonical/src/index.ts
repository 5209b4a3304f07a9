/**
 * @skein/canonical: opencode's canonical events and parts from Claude Code sessions and
 * transcripts. Both of skein's edges stand on it: the HTTP/SSE server (`@skein/serve`) and
 * the Agent Client Protocol agent (`@skein/acp`); it imports nothing of HTTP.
 */
export * as EventTranslator from "./EventTranslator.js"
export * as History from "./History.js"
export * as Ids from "./Ids.js"
export * as Invariants from "./Invariants.js"
export * as Todos from "./Todos.js"
export * as TurnBoundaries from "./TurnBoundaries.js"
