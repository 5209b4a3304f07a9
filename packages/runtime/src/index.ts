export * as Tracing from "./Tracing.js"
