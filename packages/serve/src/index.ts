/**
 * @skein/serve: opencode's canonical events from skein sessions.
 */
export * as Dashboard from "./Dashboard.js"
export * as EventTranslator from "./EventTranslator.js"
export * as History from "./History.js"
export * as Ids from "./Ids.js"
export * as Invariants from "./Invariants.js"
export * as PermissionBroker from "./PermissionBroker.js"
export * as Serve from "./Serve.js"
export * as ServeApi from "./ServeApi.js"
export * as ServeError from "./ServeError.js"
export * as Server from "./Server.js"
export * as ServerEvents from "./ServerEvents.js"
export * as SessionRegistry from "./SessionRegistry.js"
export * as Token from "./Token.js"
