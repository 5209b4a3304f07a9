// What the page knows, folded from the server's canonical events and its
// REST answers. No DOM here: `apply` returns the ids of what changed, and
// the view redraws only those.

/** @typedef {{ info: any, status: any, cost?: number, model?: string, activity: number }} SessionEntry */

export function createStore() {
  return {
    /** @type {Map<string, SessionEntry>} */
    sessions: new Map(),
    /** Pending permission asks by id. */
    asks: new Map(),
    /** sessionID → Map(messageID → { info, parts: Map(partID → part) }) */
    messages: new Map(),
    /** sessionID → Map(taskID → task) */
    tasks: new Map(),
    /** sessionID → the last error or notice worth showing. */
    notices: new Map()
  }
}

const sessionEntry = (store, id) => {
  let entry = store.sessions.get(id)
  if (entry === undefined) {
    entry = { info: { id, title: id, directory: "", time: { created: Date.now(), updated: Date.now() } }, status: { type: "idle" }, activity: 0 }
    store.sessions.set(id, entry)
  }
  return entry
}

export function putSession(store, info) {
  const entry = sessionEntry(store, info.id)
  const old = entry.info
  // An event without a title or creation time (a transcript the server found, not made) keeps what the server listed.
  entry.info = {
    ...old,
    ...info,
    title: info.title || old.title,
    directory: info.directory || old.directory,
    time: { ...old.time, ...info.time, created: info.time?.created || old.time.created, updated: Math.max(info.time?.updated ?? 0, old.time.updated ?? 0) }
  }
  if (info.model?.modelID) entry.model = info.model.modelID
  entry.activity = Math.max(entry.activity, info.time?.updated ?? 0)
}

export function putStatus(store, sessionID, status) {
  sessionEntry(store, sessionID).status = status
}

const messagesOf = (store, sessionID) => {
  let map = store.messages.get(sessionID)
  if (map === undefined) {
    map = new Map()
    store.messages.set(sessionID, map)
  }
  return map
}

const messageEntry = (store, sessionID, messageID) => {
  const map = messagesOf(store, sessionID)
  let entry = map.get(messageID)
  if (entry === undefined) {
    entry = { info: { id: messageID, sessionID, role: "assistant" }, parts: new Map() }
    map.set(messageID, entry)
  }
  return entry
}

/** A session's history from `GET /session/:id/message`, keeping what streamed in that the transcript has not caught up with. */
export function putHistory(store, sessionID, history) {
  const before = messagesOf(store, sessionID)
  const next = new Map()
  for (const { info, parts } of history) {
    next.set(info.id, { info, parts: new Map(parts.map((p) => [p.id, p])) })
  }
  for (const [id, entry] of before) {
    if (!next.has(id)) next.set(id, entry)
  }
  store.messages.set(sessionID, next)
  noteModelAndCost(store, sessionID)
}

const noteModelAndCost = (store, sessionID) => {
  const entry = store.sessions.get(sessionID)
  if (entry === undefined) return
  let cost = 0
  for (const { info } of messagesOf(store, sessionID).values()) {
    if (info.role !== "assistant") continue
    if (info.modelID) entry.model = info.modelID
    cost += info.cost ?? 0
  }
  if (cost > 0 && entry.cost === undefined) entry.cost = cost
}

/**
 * Folds one canonical event in. Returns what to redraw:
 * `{ list?: true, session?: id, parts?: [partID], asks?: true, tasks?: true }`.
 */
export function apply(store, event) {
  const p = event.properties ?? {}
  const sessionID = p.sessionID ?? p.info?.sessionID ?? p.info?.id ?? p.part?.sessionID
  if (sessionID !== undefined && store.sessions.has(sessionID)) sessionEntry(store, sessionID).activity = Date.now()
  switch (event.type) {
    case "session.created":
    case "session.updated":
      putSession(store, p.info)
      return { list: true, session: p.info.id }
    case "session.deleted":
      store.sessions.delete(p.info?.id ?? p.sessionID)
      return { list: true }
    case "session.status":
      putStatus(store, p.sessionID, p.status)
      return { list: true, session: p.sessionID }
    case "session.idle":
      putStatus(store, p.sessionID, { type: "idle" })
      return { list: true, session: p.sessionID }
    case "session.error": {
      if (p.sessionID === undefined) return {}
      const name = p.error?.name ?? "Error"
      store.notices.set(p.sessionID, name === "MessageAbortedError" ? "Aborted." : `${name}: ${p.error?.data?.message ?? ""}`)
      return { session: p.sessionID }
    }
    case "session.metrics":
      if (typeof p.cost === "number") sessionEntry(store, p.sessionID).cost = p.cost
      return { list: true, session: p.sessionID }
    case "message.updated": {
      const entry = messageEntry(store, p.sessionID, p.info.id)
      entry.info = p.info
      if (p.info.role === "assistant" && p.info.modelID) sessionEntry(store, p.sessionID).model = p.info.modelID
      return { list: true, session: p.sessionID, messages: [p.info.id] }
    }
    case "message.removed":
      messagesOf(store, p.sessionID).delete(p.messageID)
      return { session: p.sessionID, messages: [p.messageID] }
    case "message.part.updated": {
      const entry = messageEntry(store, p.sessionID, p.part.messageID)
      entry.parts.set(p.part.id, p.part)
      return { session: p.sessionID, messages: [p.part.messageID] }
    }
    case "message.part.delta": {
      const entry = messageEntry(store, p.sessionID, p.messageID)
      const part = entry.parts.get(p.partID) ?? { id: p.partID, sessionID: p.sessionID, messageID: p.messageID, type: "text", text: "" }
      // Tool input streams as JSON text; the part's parsed input arrives when the block stops.
      const field = p.field === "input" ? "inputText" : p.field
      entry.parts.set(p.partID, { ...part, [field]: (part[field] ?? "") + p.delta })
      return { session: p.sessionID, messages: [p.messageID] }
    }
    case "message.part.removed":
      messagesOf(store, p.sessionID).get(p.messageID)?.parts.delete(p.partID)
      return { session: p.sessionID, messages: [p.messageID] }
    case "permission.asked":
      store.asks.set(p.id, p)
      return { list: true, session: p.sessionID, asks: true }
    case "permission.replied":
      store.asks.delete(p.requestID)
      return { list: true, session: p.sessionID, asks: true }
    case "task.started":
      tasksOf(store, p.sessionID).set(p.taskID, { ...p, status: "running" })
      return { session: p.sessionID, tasks: true }
    case "task.progress":
    case "task.completed": {
      const tasks = tasksOf(store, p.sessionID)
      tasks.set(p.taskID, { ...tasks.get(p.taskID), ...p, status: p.status ?? tasks.get(p.taskID)?.status ?? "running" })
      return { session: p.sessionID, tasks: true }
    }
    default:
      return {}
  }
}

const tasksOf = (store, sessionID) => {
  let map = store.tasks.get(sessionID)
  if (map === undefined) {
    map = new Map()
    store.tasks.set(sessionID, map)
  }
  return map
}

/** busy / idle / retry / waiting for permission, as the list shows it. */
export function statusOf(store, sessionID) {
  for (const ask of store.asks.values()) if (ask.sessionID === sessionID) return "waiting for permission"
  const status = store.sessions.get(sessionID)?.status ?? { type: "idle" }
  return status.type === "retry" ? `retry ${status.attempt}` : status.type
}
