/**
 * A session's messages as opencode's `GET /session/:id/message` returns them
 * (`Array<{info, parts}>`), from the transcript's effective view.
 *
 * History runs the same translator as the live stream, over transcript
 * entries instead of stdout messages, so a turn loaded from the transcript
 * has the same ids and the same final parts as the turn translated live.
 */
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import type { Canonical } from "@skein/protocol"
import type { Transcript } from "@skein/protocol"
import { ResumeLoader } from "@skein/store"
import * as Effect from "effect/Effect"
import * as EventTranslator from "./EventTranslator.js"
import { onAssistant } from "./internal/assistantMessages.js"
import { finishAssistant, flushCompaction } from "./internal/messages.js"
import * as S from "./internal/state.js"
import { onCompaction, onUnknownSystem } from "./internal/systemMessages.js"
import { closeOpen } from "./internal/turns.js"
import { onUser } from "./internal/userMessages.js"

export interface WithParts {
  readonly info: Canonical.MessageInfo
  readonly parts: ReadonlyArray<Canonical.Part>
}

// ---------------------------------------------------------------------------
// Folding events into messages
// ---------------------------------------------------------------------------

/** A part as last updated, with the deltas since: joined once, when the messages are read. */
interface Folded {
  part: Canonical.Part
  deltas: Array<readonly [field: string, delta: string]> | undefined
}

interface Mutable {
  info: Canonical.MessageInfo
  parts: Map<string, Folded>
}

const appendDelta = (part: Canonical.Part, field: string, delta: string): Canonical.Part => {
  if (field === "text" && (part.type === "text" || part.type === "reasoning")) return { ...part, text: part.text + delta }
  if (field === "input" && part.type === "tool" && part.state.status === "pending") {
    return { ...part, state: { ...part.state, raw: (part.state.raw ?? "") + delta } }
  }
  return part
}

/** The part with its deltas applied, a field's run of deltas as one string. */
const settled = (folded: Folded): Canonical.Part => {
  if (folded.deltas === undefined) return folded.part
  const byField = new Map<string, Array<string>>()
  for (const [field, delta] of folded.deltas) {
    const run = byField.get(field)
    if (run === undefined) byField.set(field, [delta])
    else run.push(delta)
  }
  let part = folded.part
  for (const [field, deltas] of byField) part = appendDelta(part, field, deltas.join(""))
  folded.part = part
  folded.deltas = undefined
  return part
}

/** What a client holds, built one event at a time: a live session folds what it shows as it shows it. */
export interface Folding {
  readonly add: (event: Canonical.CanonicalEvent) => void
  /** The messages so far, sorted by id, as opencode's clients sort. */
  readonly messages: () => ReadonlyArray<WithParts>
}

const byId = (a: { readonly id: string }, b: { readonly id: string }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

export const folding = (): Folding => {
  const messages = new Map<string, Mutable>()
  const orphans = new Map<string, Map<string, Folded>>()
  const partsOf = (messageID: string) => {
    const message = messages.get(messageID)
    if (message !== undefined) return message.parts
    const pending = orphans.get(messageID) ?? new Map<string, Folded>()
    orphans.set(messageID, pending)
    return pending
  }
  const add = (event: Canonical.CanonicalEvent): void => {
    switch (event.type) {
      case "message.updated": {
        const existing = messages.get(event.properties.info.id)
        if (existing !== undefined) existing.info = event.properties.info
        else {
          const parts = orphans.get(event.properties.info.id) ?? new Map<string, Folded>()
          orphans.delete(event.properties.info.id)
          messages.set(event.properties.info.id, { info: event.properties.info, parts })
        }
        break
      }
      case "message.removed":
        messages.delete(event.properties.messageID)
        break
      case "message.part.updated": {
        const part = event.properties.part
        partsOf(part.messageID).set(part.id, { part, deltas: undefined })
        break
      }
      case "message.part.delta": {
        // A storm is thousands of these: each is kept, not applied, until the messages are read.
        const { delta, field, messageID, partID } = event.properties
        const folded = partsOf(messageID).get(partID)
        if (folded !== undefined) (folded.deltas ??= []).push([field, delta])
        break
      }
      default:
        break
    }
  }
  return {
    add,
    messages: () =>
      [...messages.values()]
        .map((m) => ({ info: m.info, parts: Array.from(m.parts.values(), settled).sort(byId) }))
        .sort((a, b) => byId(a.info, b.info))
  }
}

/**
 * What a client holds after applying `events` in order: the last info of
 * each message, the last state of each part with its deltas applied; sorted
 * by id, as opencode's clients sort.
 */
export const collect = (events: Iterable<Canonical.CanonicalEvent>): ReadonlyArray<WithParts> => {
  const fold = folding()
  for (const event of events) fold.add(event)
  return fold.messages()
}

/** An assistant message still being written: what was shown live is newer than any copy in the transcript. */
const inProgress = (m: WithParts) => m.info.role === "assistant" && m.info.time.completed === undefined

/**
 * The transcript's messages with those a live session has shown beside
 * them, by id: a prompt the CLI has not read yet, a reply still streaming.
 * A client that loads the session mid-turn replaces what it holds with this
 * list, so a message shown live but missing here would vanish from its view.
 */
export const withShown = (history: ReadonlyArray<WithParts>, shown: ReadonlyArray<WithParts>): ReadonlyArray<WithParts> => {
  if (shown.length === 0) return history
  const merged = new Map(history.map((m) => [m.info.id, m]))
  for (const m of shown) {
    if (!merged.has(m.info.id) || inProgress(m)) merged.set(m.info.id, m)
  }
  return [...merged.values()].sort((a, b) => byId(a.info, b.info))
}

// ---------------------------------------------------------------------------
// Transcript entries
// ---------------------------------------------------------------------------

const onEntry = (state: S.State, events: S.Events, entry: Transcript.ChainEntry): S.State => {
  switch (entry.type) {
    case "assistant": {
      const index = S.numberField(entry, "apiBlockIndex")
      return onAssistant(state, events, { message: entry.message, timestamp: S.parseTime(entry.timestamp), blockIndex: index })
    }
    case "user":
      // Context the CLI injects (`isMeta`) is not shown live either.
      if (entry.isMeta === true) return state
      return onUser(state, events, {
        message: entry.message,
        uuid: entry.uuid,
        timestamp: S.parseTime(entry.timestamp),
        synthetic: entry.isCompactSummary === true || S.field(entry, "isVisibleInTranscriptOnly") === true,
        toolUseResult: entry.toolUseResult
      })
    case "system":
      if (entry.subtype === "compact_boundary") {
        return onCompaction(state, events, { uuid: entry.uuid, auto: entry.compactMetadata?.trigger === "auto", summaryFollows: true })
      }
      return entry.subtype === undefined ? state : onUnknownSystem(state, events, entry.subtype, entry, state.clock)
    case "attachment":
      return state
  }
}

export interface Loaded {
  readonly messages: ReadonlyArray<WithParts>
  /** The translator's state after the history: a live translation resumed from it keeps the ids consistent. */
  readonly state: EventTranslator.State
}

/**
 * Translates chain entries (root to leaf). Parts still open at the end (a
 * turn that was cut off) stay as the transcript left them unless `close`
 * is set, which closes them as an interrupted turn would.
 */
export const fromEntries = (
  options: EventTranslator.Options,
  entries: ReadonlyArray<Transcript.ChainEntry>,
  close = false
): Loaded => {
  const events: S.Events = []
  let state = EventTranslator.initial(options)
  for (const entry of entries) state = onEntry(state, events, entry)
  // The transcript holds whole blocks only: its last message is as complete as it will be.
  state = close ? closeOpen(state, events, "interrupted") : flushCompaction(finishAssistant(state, events), events)
  return { messages: collect(events), state }
}

// ---------------------------------------------------------------------------
// From a transcript file
// ---------------------------------------------------------------------------

export interface FromTranscriptOptions extends Partial<EventTranslator.Options> {
  /** Close parts a cut-off turn left open, as an interrupt would. */
  readonly close?: boolean | undefined
  readonly load?: ResumeLoader.Options | undefined
}

/** Loads the transcript's effective view (`ResumeLoader`) and translates it. */
export const fromTranscript: (
  path: string,
  options?: FromTranscriptOptions
) => Effect.Effect<Loaded, ResumeLoader.LoadError | PlatformError, FileSystem.FileSystem> = Effect.fn(
  "History.fromTranscript"
)(function*(path: string, options: FromTranscriptOptions = {}) {
  // The loader's view is the CLI's own on resume, parallel tool results included.
  const conversation = yield* ResumeLoader.load(path, options.load)
  const entries = conversation.entries
  const cliSessionId = options.cliSessionId ?? conversation.sessionId ?? ""
  return fromEntries(
    { cliSessionId, createdAt: options.createdAt, legacy: false, cwd: options.cwd ?? cwdOf(entries) },
    entries,
    options.close === true
  )
})

const cwdOf = (entries: ReadonlyArray<Transcript.ChainEntry>): string | undefined => entries.find((e) => e.cwd !== undefined)?.cwd
