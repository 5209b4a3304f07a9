export * as Anthropic from "./Anthropic.js"
