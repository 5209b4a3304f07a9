/**
 * The promises a canonical event stream keeps, as a checker: opencode's
 * clients drop a delta for a part they have not seen, wait for every tool to
 * end, and end a turn's spinner at `session.idle`.
 */
import { Canonical } from "@skein/protocol"
import * as Either from "effect/Either"
import * as Equal from "effect/Equal"
import * as Schema from "effect/Schema"
import * as Utils from "effect/Utils"

export interface Violation {
  /** Position of the offending event (the stream's length for what is missing at the end). */
  readonly index: number
  readonly rule: string
  readonly detail: string
}

const encode = Schema.encodeUnknownEither(Canonical.CanonicalEvent)
const decode = Schema.decodeUnknownEither(Canonical.CanonicalEvent)

/** Encodes, goes through JSON as a client would, decodes: must give the same value. */
export const roundTrips = (event: Canonical.CanonicalEvent): string | undefined => {
  const encoded = encode(event)
  if (Either.isLeft(encoded)) return `does not encode: ${encoded.left.message}`
  const decoded = decode(JSON.parse(JSON.stringify(encoded.right)))
  if (Either.isLeft(decoded)) return `does not decode: ${decoded.left.message}`
  return Utils.structuralRegion(() => Equal.equals(decoded.right, JSON.parse(JSON.stringify(event))))
    ? undefined
    : "decodes to a different value"
}

interface Tracker {
  readonly seenParts: Set<string>
  readonly toolStatus: Map<string, string>
  readonly steps: Map<string, { start: number; finish: number }>
  readonly messageTurn: Map<string, number>
  busy: boolean
  turns: number
  idles: number
}

/** A message belongs to the turn live when it first showed up; none after that turn's idle. */
const afterIdle = (t: Tracker, index: number, messageID: string, turns: boolean): Violation | undefined => {
  if (!turns) return undefined
  const turn = t.messageTurn.get(messageID)
  if (turn === undefined) {
    t.messageTurn.set(messageID, t.busy ? t.turns : 0)
    return undefined
  }
  return turn > 0 && (turn < t.turns || !t.busy)
    ? { index, rule: "idle-after-last-part", detail: `message ${messageID} of turn ${turn} changed after that turn's idle` }
    : undefined
}

const onPart = (t: Tracker, part: Canonical.Part): undefined => {
  t.seenParts.add(part.id)
  if (part.type === "tool") t.toolStatus.set(part.id, part.state.status)
  if (part.type === "step-start" || part.type === "step-finish") {
    const step = t.steps.get(part.messageID) ?? { start: 0, finish: 0 }
    if (part.type === "step-start") step.start++
    else step.finish++
    t.steps.set(part.messageID, step)
  }
  return undefined
}

/** The first violation in `events`, or `undefined`. `turns: false` skips the busy/idle rules (history). */
export const check = (
  events: ReadonlyArray<Canonical.CanonicalEvent>,
  options: { readonly turns?: boolean } = {}
): Violation | undefined => {
  const turns = options.turns ?? true
  const t: Tracker = { seenParts: new Set(), toolStatus: new Map(), steps: new Map(), messageTurn: new Map(), busy: false, turns: 0, idles: 0 }
  for (let index = 0; index < events.length; index++) {
    const event = events[index]!
    const bad = roundTrips(event)
    if (bad !== undefined) return { index, rule: "round-trip", detail: `${event.type} ${bad}` }
    switch (event.type) {
      case "message.updated": {
        const v = afterIdle(t, index, event.properties.info.id, turns)
        if (v !== undefined) return v
        break
      }
      case "message.part.updated": {
        const v = afterIdle(t, index, event.properties.part.messageID, turns) ?? onPart(t, event.properties.part)
        if (v !== undefined) return v
        break
      }
      case "message.part.delta": {
        if (!t.seenParts.has(event.properties.partID)) {
          return { index, rule: "part-before-delta", detail: `delta for unseen part ${event.properties.partID}` }
        }
        const v = afterIdle(t, index, event.properties.messageID, turns)
        if (v !== undefined) return v
        break
      }
      case "session.status":
        if (!turns) break
        if (event.properties.status.type === "busy") {
          if (t.busy) return { index, rule: "one-idle-per-turn", detail: "busy while already busy" }
          t.busy = true
          t.turns++
        } else if (event.properties.status.type === "idle") {
          if (!t.busy) return { index, rule: "one-idle-per-turn", detail: "idle without a turn" }
          if (events[index + 1]?.type !== "session.idle") {
            return { index, rule: "one-idle-per-turn", detail: "status idle not followed by session.idle" }
          }
          t.busy = false
        }
        break
      case "session.idle":
        if (!turns) break
        t.idles++
        if (t.idles !== t.turns) return { index, rule: "one-idle-per-turn", detail: `${t.idles} idles for ${t.turns} turns` }
        break
      default:
        break
    }
  }
  return atEnd(t, events.length, turns)
}

const atEnd = (t: Tracker, index: number, turns: boolean): Violation | undefined => {
  for (const [id, status] of t.toolStatus) {
    if (status !== "completed" && status !== "error") return { index, rule: "tool-ends", detail: `tool part ${id} ends ${status}` }
  }
  for (const [messageID, step] of t.steps) {
    if (step.start !== step.finish) {
      return { index, rule: "step-balanced", detail: `${messageID}: ${step.start} step-start, ${step.finish} step-finish` }
    }
  }
  if (turns && t.busy) return { index, rule: "one-idle-per-turn", detail: "the last turn never went idle" }
  return undefined
}
