// DOM drawing. Everything the server sends is set as text, never as HTML.
import { statusOf } from "./store.js"

const h = (tag, attrs = {}, ...children) => {
  const el = document.createElement(tag)
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue
    if (key === "class") el.className = value
    else if (key === "text") el.textContent = value
    else el.setAttribute(key, value === true ? "" : String(value))
  }
  for (const child of children) if (child !== undefined && child !== null) el.append(child)
  return el
}

const byId = (id) => document.getElementById(id)

const ago = (ms) => {
  if (!ms) return "—"
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000))
  if (s < 60) return `${s}s ago`
  if (s < 3600) return `${Math.round(s / 60)}m ago`
  if (s < 86400) return `${Math.round(s / 3600)}h ago`
  return new Date(ms).toLocaleDateString()
}

const money = (cost) => (typeof cost === "number" ? `$${cost.toFixed(4)}` : "—")

const pretty = (value) => {
  if (value === undefined) return ""
  if (typeof value === "string") return value
  return JSON.stringify(value, null, 2)
}

const badge = (status) => h("span", { class: `badge badge-${status.replace(/[^a-z]+/g, "-")}`, text: status })

// ---------------------------------------------------------------------------
// The sessions list
// ---------------------------------------------------------------------------

export function drawList(store, current) {
  const list = byId("session-list")
  const entries = [...store.sessions.values()].sort((a, b) => (b.info.time?.created ?? 0) - (a.info.time?.created ?? 0))
  byId("no-sessions").hidden = entries.length > 0
  const existing = new Map([...list.children].map((li) => [li.dataset.id, li]))
  entries.forEach((entry, i) => {
    const id = entry.info.id
    let li = existing.get(id)
    if (li === undefined) {
      li = h("li", { "data-id": id }, h("a", { href: `#/session/${encodeURIComponent(id)}` }))
    }
    existing.delete(id)
    const status = statusOf(store, id)
    const link = li.firstElementChild
    link.replaceChildren(
      h("span", { class: "title", text: entry.info.title || id }),
      badge(status),
      h("span", { class: "dir", text: entry.info.directory }),
      h("span", { class: "facts", text: `${entry.model ?? "model —"} · ${money(entry.cost)} · ${ago(entry.activity || entry.info.time?.updated)}` })
    )
    link.setAttribute("aria-current", id === current ? "page" : "false")
    li.dataset.status = status
    // Only move a row when it is out of place: moving the focused row would drop the focus.
    if (list.children[i] !== li) list.insertBefore(li, list.children[i] ?? null)
  })
  for (const li of existing.values()) li.remove()
}

// ---------------------------------------------------------------------------
// One session
// ---------------------------------------------------------------------------

export function drawHeader(store, id) {
  const entry = store.sessions.get(id)
  byId("session-title").textContent = entry?.info.title ?? id
  const status = statusOf(store, id)
  byId("session-meta").replaceChildren(
    badge(status),
    ` ${entry?.info.directory ?? ""} · ${entry?.model ?? "model —"} · ${money(entry?.cost)}`
  )
  byId("session").dataset.status = status
  const notice = store.notices.get(id)
  byId("session-notice").hidden = notice === undefined
  byId("session-notice").textContent = notice ?? ""
}

/** Cards are kept while their ask is pending: redrawing them would take the keyboard focus away. */
export function drawAsks(store, id) {
  const section = byId("asks")
  const asks = [...store.asks.values()].filter((ask) => ask.sessionID === id)
  const wanted = new Set(asks.map((ask) => ask.id))
  for (const card of [...section.children]) if (!wanted.has(card.dataset.ask)) card.remove()
  const shown = new Set([...section.children].map((card) => card.dataset.ask))
  for (const ask of asks) if (!shown.has(ask.id)) section.append(drawAsk(ask))
}

const drawAsk = (ask) =>
  h(
    "article",
    { class: "ask", "data-ask": ask.id, "aria-label": `Permission for ${askedBy(ask)}` },
    h("h3", { text: `Allow ${askedBy(ask)}?` }),
    ask.patterns?.length ? h("p", { class: "muted", text: ask.patterns.join(", ") }) : undefined,
    h("pre", { class: "io", text: pretty(ask.metadata) }),
    h(
      "div",
      { class: "actions" },
      h("button", { type: "button", "data-reply": "once", "data-ask": ask.id, text: "Allow once" }),
      h("button", { type: "button", "data-reply": "always", "data-ask": ask.id, text: "Always" }),
      h("button", { type: "button", class: "danger", "data-reply": "reject", "data-ask": ask.id, text: "Deny" })
    )
  )

export function drawTasks(store, id) {
  const tasks = [...(store.tasks.get(id)?.values() ?? [])]
  byId("tasks").hidden = tasks.length === 0
  byId("task-list").replaceChildren(...tasks.map((task) =>
    h(
      "li",
      {},
      badge(task.status),
      ` ${task.description ?? task.taskID}`,
      task.summary ? h("span", { class: "muted", text: ` — ${task.summary}` }) : undefined,
      task.usage ? h("span", { class: "muted", text: ` (${task.usage.tool_uses} tools, ${task.usage.total_tokens} tokens)` }) : undefined
    )
  ))
}

/** Redraws the given messages (all when `ids` is undefined), in the store's order. */
export function drawMessages(store, id, ids, open) {
  const list = byId("messages")
  const messages = store.messages.get(id) ?? new Map()
  const existing = new Map([...list.children].map((li) => [li.dataset.id, li]))
  let i = 0
  for (const [messageID, entry] of messages) {
    let li = existing.get(messageID)
    existing.delete(messageID)
    if (li === undefined || ids === undefined || ids.includes(messageID)) {
      const fresh = drawMessage(entry, open)
      if (li !== undefined) li.replaceWith(fresh)
      li = fresh
    }
    if (list.children[i] !== li) list.insertBefore(li, list.children[i] ?? null)
    i++
  }
  for (const li of existing.values()) li.remove()
}

const drawMessage = (entry, open) => {
  const { info } = entry
  const parts = [...entry.parts.values()].map((part) => drawPart(part, open)).filter((el) => el !== undefined)
  const who = info.role === "user" ? "You" : `Assistant${info.modelID ? ` · ${info.modelID}` : ""}`
  return h(
    "li",
    { class: `message message-${info.role}`, "data-id": info.id, "data-role": info.role },
    h("p", { class: "who", text: who }),
    ...parts,
    info.error ? drawError(info.error) : undefined
  )
}

/** A reply cut short by an abort is marked, as opencode's clients mark it; other errors show their name and message. */
const drawError = (error) =>
  error.name === "MessageAbortedError"
    ? h("p", { class: "muted interrupted", text: "interrupted" })
    : h("p", { class: "error", text: `${error.name}: ${error.data?.message ?? ""}` })

const drawPart = (part, open) => {
  switch (part.type) {
    case "text":
      return part.text ? h("div", { class: "text", "data-part": part.id, text: part.text }) : undefined
    case "reasoning": {
      const details = h(
        "details",
        { class: "reasoning", "data-part": part.id, open: open.has(part.id) },
        h("summary", { text: part.redacted ? "Reasoning (redacted)" : "Reasoning" }),
        h("div", { class: "text", text: part.text ?? "" })
      )
      details.addEventListener("toggle", () => (details.open ? open.add(part.id) : open.delete(part.id)))
      return details
    }
    case "tool":
      return drawTool(part)
    case "step-finish": {
      const t = part.tokens ?? {}
      const cache = t.cache ? ` · cache ${t.cache.read}/${t.cache.write}` : ""
      return h("p", { class: "step", "data-part": part.id, text: `step ${part.reason ?? ""} · ${t.input ?? 0} in / ${t.output ?? 0} out${cache} · ${money(part.cost)}` })
    }
    case "compaction":
      return h("p", { class: "marker", "data-part": part.id, text: `context compacted${part.auto ? " (auto)" : ""}` })
    case "retry":
      return h("p", { class: "retry", "data-part": part.id, text: `retry ${part.attempt}: ${part.error?.data?.message ?? part.error?.name ?? ""}` })
    case "subtask":
      return h("p", { class: "marker", "data-part": part.id, text: `subtask: ${part.description ?? part.prompt ?? ""}` })
    case "file":
      // A data URL is the file itself: name it, never print it.
      return h("p", { class: "muted", "data-part": part.id, text: `file ${part.filename ?? (part.url.startsWith("data:") ? part.mime : part.url)}` })
    default:
      return undefined
  }
}

/** The CLI's tool behind an ask: one asked under opencode's permission name keeps it in `metadata.cli`. */
const askedBy = (ask) => ask.metadata?.cli?.tool ?? ask.permission

/** The CLI's own name and input: a part shown under opencode's tool name keeps them in `metadata.cli`. */
const cliOf = (part) => part.metadata?.cli ?? { tool: part.tool, input: part.state?.input }

const drawTool = (part) => {
  const state = part.state ?? { status: "pending" }
  const cli = cliOf(part)
  const input = cli.input && Object.keys(cli.input).length > 0 ? cli.input : part.inputText ?? state.raw ?? cli.input
  const output = state.status === "completed" ? state.output : state.status === "error" ? state.error : undefined
  return h(
    "div",
    { class: "tool", "data-part": part.id, "data-status": state.status },
    h("p", { class: "tool-head" }, h("strong", { text: cli.tool }), " ", badge(state.status), state.title ? h("span", { class: "muted", text: ` ${state.title}` }) : undefined),
    h("pre", { class: "io", "aria-label": "input", text: pretty(input) }),
    output === undefined ? undefined : h("pre", { class: `io output${state.status === "error" ? " error" : ""}`, "aria-label": "output", text: pretty(output) })
  )
}
