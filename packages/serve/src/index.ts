/**
 * @skein/serve: the opencode-compatible HTTP/SSE edge over skein sessions.
 */
export * as Dashboard from "./Dashboard.js"
/** The translator moved to `@skein/canonical`; re-exported here so existing imports keep working. */
export { EventTranslator, History, Ids, Invariants } from "@skein/canonical"
export * as PermissionBroker from "./PermissionBroker.js"
export * as Serve from "./Serve.js"
export * as ServeApi from "./ServeApi.js"
export * as ServeError from "./ServeError.js"
export * as Server from "./Server.js"
export * as ServerEvents from "./ServerEvents.js"
export * as SessionRegistry from "./SessionRegistry.js"
export * as Token from "./Token.js"
