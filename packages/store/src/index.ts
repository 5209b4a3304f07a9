/**
 * @skein/store: transcripts the CLI can resume, resume and branch, and the runtime's own event log.
 */
export * as ResumeLoader from "./ResumeLoader.js"
export * as Branch from "./Branch.js"
export * as TranscriptLayout from "./TranscriptLayout.js"
export * as TranscriptStore from "./TranscriptStore.js"
export * as SessionIndex from "./SessionIndex.js"
export * as EventLog from "./EventLog.js"
export * as SummaryCoverage from "./SummaryCoverage.js"
