/**
 * `legacy` mode: the flat events of the pre-canonical wire, written beside
 * the canonical ones so that old consumers keep working while they move.
 * Each carries the CLI's message as it came.
 */
import type { CliMessage } from "@skein/protocol"
import { Canonical } from "@skein/protocol"

export const legacyEvent = (sessionID: string, message: CliMessage.CliMessage): Canonical.CanonicalEvent | undefined => {
  switch (message.type) {
    case "assistant":
    case "user":
    case "system":
      return Canonical.event("session.message", { sessionID, message })
    case "stream_event":
      return Canonical.event("session.stream_event", { sessionID, message })
    case "control_request":
      return Canonical.event("session.control_request", { sessionID, message })
    case "result":
      return Canonical.event("session.result", { sessionID, message })
    default:
      return undefined
  }
}
