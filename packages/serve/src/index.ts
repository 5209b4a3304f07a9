/**
 * @skein/serve: opencode's canonical events from skein sessions.
 */
export * as EventTranslator from "./EventTranslator.js"
export * as History from "./History.js"
export * as Ids from "./Ids.js"
export * as Invariants from "./Invariants.js"
