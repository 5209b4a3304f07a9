/**
 * @skein/kernel: the actor machinery under every session, task and worker.
 */
export * as ProcessHost from "./ProcessHost.js"
export * as ProcessJournal from "./ProcessJournal.js"
export * as Task from "./Task.js"
export * as TaskManager from "./TaskManager.js"
export * as FileLock from "./FileLock.js"
export * as AtomicFile from "./AtomicFile.js"
export * as Gate from "./Gate.js"
export * as Actor from "./Actor.js"
export * as Supervisor from "./Supervisor.js"
export * as SlicedScheduler from "./SlicedScheduler.js"
