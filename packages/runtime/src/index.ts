/**
 * @skein/runtime: one layer to embed skein, and tracing.
 */
export * as Skein from "./Skein.js"
export * as Tracing from "./Tracing.js"
