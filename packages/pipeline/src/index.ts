/**
 * @skein/pipeline: durable, budgeted pipelines of Claude Code sessions,
 * composed as Effect streams on @effect/workflow.
 */
export * as Budget from "./Budget.js"
export * as Journal from "./Journal.js"
export * as Launch from "./Launch.js"
export * as Pipeline from "./Pipeline.js"
export * as PipelineError from "./PipelineError.js"
export * as Run from "./Run.js"
export * as RunEvent from "./RunEvent.js"
export * as Stage from "./Stage.js"
