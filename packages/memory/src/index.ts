/**
 * @skein/memory: session memory, memory extraction and autoDream, in the
 * Claude Code CLI's own memory layout.
 */
export * as MemoryFile from "./MemoryFile.js"
export * as MemoryFolder from "./MemoryFolder.js"
export * as DreamGates from "./DreamGates.js"
export * as SingleFlight from "./SingleFlight.js"
export * as MemoryPolicy from "./MemoryPolicy.js"
export * as ExtractionCursor from "./ExtractionCursor.js"
export * as MemoryEvents from "./MemoryEvents.js"
export * as Extraction from "./Extraction.js"
export * as Dream from "./Dream.js"
export * as SessionMemory from "./SessionMemory.js"
export * as Memory from "./Memory.js"
