/**
 * Permission and question requests: the CLI's `can_use_tool` (a question
 * when the tool is `AskUserQuestion`) and MCP `elicitation`, their answers,
 * and the CLI's withdrawal of a request.
 */
import type { Control } from "@skein/protocol"
import { Canonical } from "@skein/protocol"
import * as Ids from "../Ids.js"
import * as NativeTools from "./nativeTools.js"
import type { Events, State } from "./state.js"
import { deleteMap, field, setMap, update } from "./state.js"

const patternsOf = (request: Control.CanUseTool): ReadonlyArray<string> => {
  for (const key of ["command", "file_path", "path", "url", "pattern"]) {
    const value = field(request.input, key)
    if (typeof value === "string") return [value]
  }
  return request.blocked_path !== undefined ? [request.blocked_path] : ["*"]
}

const alwaysOf = (request: Control.CanUseTool): ReadonlyArray<string> =>
  (request.permission_suggestions ?? []).flatMap((suggestion) => {
    const rules = field(suggestion, "rules")
    if (!Array.isArray(rules)) return []
    return rules.flatMap((rule: unknown) => {
      const content = field(rule, "ruleContent")
      const tool = field(rule, "toolName")
      return typeof content === "string" ? [content] : typeof tool === "string" ? [tool] : []
    })
  })

const questionsOf = (input: Canonical.JsonObject): ReadonlyArray<Canonical.QuestionInfo> | undefined => {
  const questions = field(input, "questions")
  if (!Array.isArray(questions)) return undefined
  return questions.map((q: unknown) => {
    const options = field(q, "options")
    const multiple = field(q, "multiSelect") ?? field(q, "multiple")
    return {
      question: String(field(q, "question") ?? ""),
      header: String(field(q, "header") ?? ""),
      options: Array.isArray(options)
        ? options.map((o: unknown) => ({ label: String(field(o, "label") ?? ""), description: String(field(o, "description") ?? "") }))
        : [],
      ...(typeof multiple === "boolean" ? { multiple } : {})
    }
  })
}

const mint = (state: State, prefix: "per" | "que", requestId: string) => {
  const ordinal = state.requestOrdinal + 1
  return { id: Ids.make(prefix, Ids.sortKey(state.clock, ordinal), `${state.options.cliSessionId}/${requestId}`), ordinal }
}

export const onRequest = (state: State, events: Events, requestId: string, request: Control.CliRequestPayload): State => {
  if (state.requests.has(requestId)) return state
  if (request.subtype === "can_use_tool") {
    const questions = request.tool_name === "AskUserQuestion" ? questionsOf(request.input) : undefined
    const kind = questions !== undefined ? "question" : "permission"
    const { id, ordinal } = mint(state, kind === "question" ? "que" : "per", requestId)
    const owner = state.tools.get(request.tool_use_id)
    const tool = owner !== undefined ? { tool: { messageID: owner.messageID, callID: request.tool_use_id } } : {}
    events.push(
      questions !== undefined
        ? Canonical.event("question.asked", { id, sessionID: state.sessionID, questions, ...tool })
        : Canonical.event("permission.asked", {
          id,
          sessionID: state.sessionID,
          permission: NativeTools.permission(request.tool_name),
          patterns: patternsOf(request),
          metadata: NativeTools.permissionMetadata(request.tool_name, request.input),
          always: alwaysOf(request),
          ...tool
        })
    )
    return update(state, {
      requestOrdinal: ordinal,
      requests: setMap(state.requests, requestId, { id, kind, callID: request.tool_use_id })
    })
  }
  if (request.subtype === "elicitation") {
    const { id, ordinal } = mint(state, "que", requestId)
    events.push(Canonical.event("question.asked", {
      id,
      sessionID: state.sessionID,
      questions: [{ question: request.message, header: request.mcp_server_name, options: [] }]
    }))
    return update(state, { requestOrdinal: ordinal, requests: setMap(state.requests, requestId, { id, kind: "question", callID: undefined }) })
  }
  return state
}

export type Answer =
  | { readonly _tag: "Permission"; readonly reply: Canonical.PermissionReply }
  | { readonly _tag: "Question"; readonly answers: ReadonlyArray<ReadonlyArray<string>> }
  | { readonly _tag: "Rejected" }

/** The host's answer, or the CLI's withdrawal (`Rejected`). Unknown request ids emit nothing. */
export const onAnswer = (state: State, events: Events, requestId: string, answer: Answer): State => {
  const request = state.requests.get(requestId)
  if (request === undefined) return state
  const sessionID = state.sessionID
  if (request.kind === "permission") {
    const reply = answer._tag === "Permission" ? answer.reply : "reject"
    events.push(Canonical.event("permission.replied", { sessionID, requestID: request.id, reply }))
  } else if (answer._tag === "Question") {
    events.push(Canonical.event("question.replied", { sessionID, requestID: request.id, answers: answer.answers }))
  } else if (answer._tag === "Permission" && answer.reply !== "reject") {
    events.push(Canonical.event("question.replied", { sessionID, requestID: request.id, answers: [] }))
  } else {
    events.push(Canonical.event("question.rejected", { sessionID, requestID: request.id }))
  }
  return update(state, { requests: deleteMap(state.requests, requestId) })
}
