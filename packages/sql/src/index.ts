/**
 * @skein/sql: session state in SQL (sqlite or Postgres), so a session can
 * continue on another machine: the transcript mirror and restore, the event
 * log, the catalog of sessions and the pending asks.
 *
 * @since 0.0.0
 */
export * as AskLedger from "./AskLedger.js"
export * as SessionCatalog from "./SessionCatalog.js"
export * as SqlEventLog from "./SqlEventLog.js"
export * as SqlStore from "./SqlStore.js"
export * as SqlStoreError from "./SqlStoreError.js"
export * as StoreUrl from "./StoreUrl.js"
export * as TranscriptMirror from "./TranscriptMirror.js"
