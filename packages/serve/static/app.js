// The dashboard: REST for what is, `/global/event` (canonical events only)
// for what changes. The cookie carries the token, so EventSource needs no
// header; it resumes by itself with `Last-Event-ID`, and a stream the page
// has to reopen passes the last id as `?lastEventId=`.
import { apply, createStore, putHistory, putSession, putStatus } from "./store.js"
import { drawAsks, drawHeader, drawList, drawMessages, drawTasks } from "./view.js"

const store = createStore()
/** Reasoning parts the user opened. */
const open = new Set()
const byId = (id) => document.getElementById(id)
let current = null
let lastEventId = null
let source = null

const api = async (method, path, body) => {
  const response = await fetch(path, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body)
  })
  const text = await response.text()
  const data = text === "" ? undefined : JSON.parse(text)
  if (!response.ok) throw new Error(data?.data?.message ?? `${method} ${path}: ${response.status}`)
  return { data, headers: response.headers }
}

// ---------------------------------------------------------------------------
// Drawing, batched per frame
// ---------------------------------------------------------------------------

let pending = { list: false, header: false, asks: false, tasks: false, messages: new Set(), all: false }
let scheduled = false

const schedule = (change) => {
  if (change.list) pending.list = true
  if (change.session !== undefined && change.session === current) {
    pending.header = true
    if (change.asks) pending.asks = true
    if (change.tasks) pending.tasks = true
    for (const id of change.messages ?? []) pending.messages.add(id)
  }
  if (change.asks) pending.list = true
  if (change.all) pending = { ...pending, list: true, header: true, asks: true, tasks: true, all: true }
  if (!scheduled) {
    scheduled = true
    requestAnimationFrame(flush)
  }
}

const flush = () => {
  scheduled = false
  const p = pending
  pending = { list: false, header: false, asks: false, tasks: false, messages: new Set(), all: false }
  if (p.list) drawList(store, current)
  if (current === null) return
  if (p.header) drawHeader(store, current)
  if (p.asks) drawAsks(store, current)
  if (p.tasks) drawTasks(store, current)
  if (p.all || p.messages.size > 0) {
    const view = byId("messages")
    const atEnd = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40
    drawMessages(store, current, p.all ? undefined : [...p.messages], open)
    if (atEnd && view.lastElementChild) window.scrollTo({ top: document.body.scrollHeight })
  }
}

// ---------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------

const connection = (state, text) => {
  const el = byId("connection")
  el.dataset.state = state
  el.textContent = text
}

const connect = () => {
  const query = new URLSearchParams({ eventVersion: "2" })
  if (lastEventId !== null) query.set("lastEventId", lastEventId)
  source = new EventSource(`/global/event?${query}`)
  source.onopen = () => connection("live", "live")
  source.onmessage = (message) => {
    if (message.lastEventId !== "") lastEventId = message.lastEventId
    const { payload } = JSON.parse(message.data)
    if (payload.type === "server.connected") connection("live", "live")
    else if (payload.type === "server.resync") resync()
    else schedule(apply(store, payload))
  }
  source.onerror = () => {
    connection("reconnecting", "reconnecting…")
    // EventSource retries by itself unless the server refused the stream.
    if (source.readyState === EventSource.CLOSED) {
      source = null
      setTimeout(() => void start(), 3000)
    }
  }
}

/** The log no longer holds what we missed: reload everything. */
const resync = async () => {
  await loadSessions()
  if (current !== null) await loadSession(current)
}

// ---------------------------------------------------------------------------
// Loading and routing
// ---------------------------------------------------------------------------

const loadSessions = async () => {
  const [{ data: sessions }, { data: statuses }] = await Promise.all([api("GET", "/dashboard/sessions"), api("GET", "/session/status")])
  for (const info of sessions) putSession(store, info)
  for (const [id, status] of Object.entries(statuses)) putStatus(store, id, status)
  schedule({ list: true })
}

const loadSession = async (id) => {
  const { data } = await api("GET", `/session/${encodeURIComponent(id)}/message`)
  putHistory(store, id, data)
  schedule({ all: true })
}

const route = async () => {
  const match = /^#\/session\/(.+)$/.exec(location.hash)
  current = match ? decodeURIComponent(match[1]) : null
  document.body.classList.toggle("has-session", current !== null)
  byId("session").hidden = current === null
  byId("placeholder").hidden = current !== null
  byId("messages").replaceChildren()
  schedule({ all: true })
  if (current === null) return
  byId("view").focus({ preventScroll: true })
  try {
    await loadSession(current)
  } catch (e) {
    notice(String(e.message ?? e))
  }
}

const notice = (text) => {
  if (current === null) return
  store.notices.set(current, text)
  schedule({ session: current })
}

// ---------------------------------------------------------------------------
// Actions
// ---------------------------------------------------------------------------

const act = (run) => async (event) => {
  event.preventDefault()
  try {
    await run(event)
  } catch (e) {
    notice(String(e.message ?? e))
  }
}

const send = act(async () => {
  const box = byId("prompt")
  const text = box.value.trim()
  if (text === "" || current === null) return
  const id = current
  box.value = ""
  store.notices.delete(id)
  // The server shows the prompt itself (live, under its history id), once the CLI reads it.
  await api("POST", `/session/${encodeURIComponent(id)}/prompt_async`, { parts: [{ type: "text", text }] })
})

const reply = act(async (event) => {
  const button = event.target.closest("button[data-reply]")
  if (button === null) return
  const id = button.dataset.ask
  for (const b of button.parentElement.querySelectorAll("button")) b.disabled = true
  try {
    await api("POST", `/permission/${encodeURIComponent(id)}/reply`, { reply: button.dataset.reply })
  } finally {
    // Answered here or elsewhere, it is no longer ours to answer.
    const ask = store.asks.get(id)
    store.asks.delete(id)
    schedule({ session: ask?.sessionID ?? current, asks: true })
  }
})

const abort = act(async () => {
  if (current !== null) await api("POST", `/session/${encodeURIComponent(current)}/abort`)
})

const fork = act(async () => {
  if (current === null) return
  const { data } = await api("POST", `/session/${encodeURIComponent(current)}/fork`, {})
  putSession(store, data)
  location.hash = `#/session/${encodeURIComponent(data.id)}`
})

const create = act(async () => {
  const { data } = await api("POST", "/session", {})
  putSession(store, data)
  location.hash = `#/session/${encodeURIComponent(data.id)}`
})

const logout = act(async () => {
  await api("POST", "/dashboard/logout")
  source?.close()
  source = null
  await start()
})

const login = act(async () => {
  const token = byId("login-token").value
  const response = await fetch("/dashboard/login", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ token })
  })
  byId("login-error").hidden = response.ok
  byId("login-error").textContent = response.ok ? "" : "That token is not the server's."
  if (response.ok) await start()
})

// ---------------------------------------------------------------------------
// Start
// ---------------------------------------------------------------------------

const start = async () => {
  const { data } = await api("GET", "/dashboard/auth")
  byId("login").hidden = data.authenticated
  byId("app").hidden = !data.authenticated
  byId("logout").hidden = !data.authenticated
  if (!data.authenticated) {
    connection("signed-out", "signed out")
    byId("login-token").focus()
    return
  }
  if (source === null) connect()
  await loadSessions()
  await route()
}

byId("login-form").addEventListener("submit", login)
byId("prompt-form").addEventListener("submit", send)
byId("prompt").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) send(event)
})
byId("asks").addEventListener("click", reply)
byId("abort").addEventListener("click", abort)
byId("fork").addEventListener("click", fork)
byId("new-session").addEventListener("click", create)
byId("logout").addEventListener("click", logout)
window.addEventListener("hashchange", () => void route())
// Keep "last activity" honest while nothing happens.
setInterval(() => schedule({ list: true }), 15_000)
void start()
