/**
 * @skein/compact: compaction passes over the CLI's own transcript that the real CLI honours on resume.
 */
export * as AutoCompaction from "./AutoCompaction.js"
export * as CircuitBreaker from "./CircuitBreaker.js"
export * as CompactBoundary from "./CompactBoundary.js"
export * as CompactPreparation from "./CompactPreparation.js"
export * as CompactableSession from "./CompactableSession.js"
export * as Compaction from "./Compaction.js"
export * as PostCompactRestore from "./PostCompactRestore.js"
export * as SessionMemoryCompaction from "./SessionMemoryCompaction.js"
export * as SummarizingCompaction from "./SummarizingCompaction.js"
export * as TokenCounter from "./TokenCounter.js"
