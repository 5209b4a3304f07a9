/**
 * @skein/acp: Claude Code sessions over the Agent Client Protocol. An ACP
 * agent (`AcpAgent.serve`, which `skein acp` runs on stdio) and the thin
 * mapping from canonical events to ACP updates (`Updates`).
 */
export * as AcpAgent from "./AcpAgent.js"
export * as AcpError from "./AcpError.js"
export * as Updates from "./Updates.js"
