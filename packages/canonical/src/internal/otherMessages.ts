/**
 * Top-level messages outside the conversation: attachments, progress, tool
 * progress and tombstones (types this release's schemas do not model are read
 * by their fields).
 */
import type { CliMessage, Lenient } from "@skein/protocol"
import { Canonical as C } from "@skein/protocol"
import * as S from "./state.js"
import { onUnknownSystem } from "./systemMessages.js"

type State = S.State

export const onToolProgress = (state: State, events: S.Events, message: CliMessage.ToolProgress): State => {
  events.push(C.event("tool.progress", {
    sessionID: state.sessionID,
    toolUseID: message.tool_use_id,
    toolName: message.tool_name,
    parentToolUseID: message.parent_tool_use_id,
    elapsedTimeSeconds: message.elapsed_time_seconds
  }))
  return state
}

export const onUnknown = (state: State, events: S.Events, event: Lenient.Unknown, now: number): State => {
  const json = event.json
  if (event.type === "system" && event.subtype !== undefined) return onUnknownSystem(state, events, event.subtype, json, now)
  switch (event.type) {
    case "attachment": {
      const attachment = S.field(json, "attachment") ?? json
      const type = S.stringField(attachment, "type")
      const uuid = S.stringField(json, "uuid")
      events.push(C.event("message.attachment", {
        sessionID: state.sessionID,
        ...(type !== undefined ? { attachmentType: type } : {}),
        ...(uuid !== undefined ? { messageID: uuid } : {}),
        attachment
      }))
      return state
    }
    case "progress": {
      const toolUseID = S.stringField(json, "toolUseID") ?? S.stringField(json, "tool_use_id")
      if (toolUseID === undefined) return state
      const parent = S.stringField(json, "parentToolUseID") ?? S.stringField(json, "parent_tool_use_id")
      events.push(C.event("tool.progress", {
        sessionID: state.sessionID,
        toolUseID,
        ...(parent !== undefined ? { parentToolUseID: parent } : {}),
        data: S.field(json, "data")
      }))
      return state
    }
    case "tombstone": {
      const target = S.stringField(S.field(json, "message"), "uuid") ?? S.stringField(json, "uuid")
      if (target === undefined) return state
      events.push(C.event("message.removed", { sessionID: state.sessionID, messageID: target }))
      return state
    }
    default:
      return state
  }
}

