/**
 * `GET /event` and `GET /global/event`: the durable log as SSE.
 *
 * Each frame's `id:` is the log's seq, so `Last-Event-ID` (header, or
 * `?lastEventId=` for a browser's first EventSource connection) resumes
 * exactly after the last frame the client got. Frames that are not events
 * (`server.connected`, heartbeats, re-announced asks) carry the cursor the
 * client already holds. A client reads from the log at its own pace, so
 * nothing is buffered for it beyond a bounded follow buffer; one that falls
 * more than `maxLag` events behind the live end (replay excepted) is sent
 * `server.resync` and disconnected.
 */
import type { Canonical } from "@skein/protocol"
import { Canonical as C } from "@skein/protocol"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import type { PermissionBroker } from "../PermissionBroker.js"
import { eventId, type ServerEvents } from "../ServerEvents.js"
import { frame } from "./http.js"

export interface Options {
  readonly events: ServerEvents["Type"]
  readonly broker: PermissionBroker["Type"]
  /** `/event`: one directory; `/global/event`: every directory, in `{directory, payload}` envelopes. */
  readonly directory: string | undefined
  readonly lastEventId: number | undefined
  /** `Accept-Event-Version: 2`: the canonical events only, without the legacy dual-write. */
  readonly canonicalOnly: boolean
  readonly heartbeat: Duration.DurationInput
  readonly maxLag: number
}

const wrap = (global: boolean, directory: string, payload: { readonly type: string; readonly properties: unknown }, id: string) =>
  global ? { directory, payload: { id, ...payload } } : { id, ...payload }

export const stream = Effect.fn("Sse.stream")(function*(options: Options) {
  const { events } = options
  const global = options.directory === undefined
  const next = yield* events.nextSeq
  const first = yield* Effect.orDie(events.firstSeq)
  const requested = options.lastEventId === undefined ? next : Math.min(options.lastEventId + 1, next)
  const from = Math.max(requested, first)
  let cursor = from - 1
  const home = options.directory ?? ""
  const control = (type: string, properties: unknown) => frame(cursor, wrap(global, home, { type, properties }, eventId(cursor)))

  const head: Array<string> = [control("server.connected", {})]
  // Events between the cursor and the oldest retained one are gone: the client must reload.
  if (requested < first) head.push(control("server.resync", { reason: "retention", from: requested, first }))
  for (const pending of yield* options.broker.pending(options.directory)) {
    const asked: Canonical.CanonicalEvent = C.event("permission.asked", pending.request)
    head.push(frame(cursor, wrap(global, pending.directory, asked, eventId(cursor))))
  }

  const live = events.follow(from).pipe(
    Stream.orDie,
    Stream.mapEffect((record) =>
      // Replay reads the disk at the client's pace; only a live client can fall behind.
      record.seq < next ? Effect.succeed({ record, behind: 0 }) : Effect.map(events.nextSeq, (newest) => ({ record, behind: newest - 1 - record.seq }))
    ),
    Stream.takeUntil(({ behind }) => behind > options.maxLag),
    Stream.map(({ behind, record }) => {
      if (behind > options.maxLag) {
        return control("server.resync", { reason: "slow client", behind })
      }
      cursor = record.seq
      const { directory, payload } = record.message
      if (!global && directory !== options.directory) return ""
      if (options.canonicalOnly && C.legacyEventTypes.has(payload.type)) return ""
      return frame(record.seq, wrap(global, directory, payload, eventId(record.seq)))
    }),
    Stream.filter((text) => text.length > 0)
  )
  const heartbeats = Stream.fromSchedule(Schedule.spaced(Duration.decode(options.heartbeat))).pipe(
    Stream.map(() => control("server.heartbeat", {}))
  )
  return Stream.fromIterable(head).pipe(
    Stream.concat(Stream.merge(live, heartbeats, { haltStrategy: "left" })),
    Stream.encodeText
  )
})
