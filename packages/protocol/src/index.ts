export * as Anthropic from "./Anthropic.js"
export * as Canonical from "./Canonical.js"
