/**
 * The dispatch of a read alone: runs of events that route nowhere share one
 * step of the turns, and an event that routes somewhere is stepped, then
 * routed, before the events after it. `routeOf` over a real capture: only
 * control answers, requests, `init`, tasks and tool blocks route anywhere.
 */
import { describe, expect, it } from "@effect/vitest"
import { CliMessage } from "@skein/protocol"
import { Effect, Option } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Dispatch from "../../src/internal/dispatch.js"
import type { SessionEvent } from "../../src/Turn.js"

const fixtures = Path.join(import.meta.dirname, "..", "..", "..", "protocol", "test", "fixtures")

/** A diagnostic event named by its text, routed when the name starts with `!`. */
const event = (name: string): SessionEvent => CliMessage.decodeLine(name, 1)
const nameOf = (e: SessionEvent) => (e._tag === "Unparseable" ? e.raw : e._tag)

describe("dispatch", () => {
  it.effect("a run of unrouted events is one step; a routed one is stepped, then routed, in order", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const dispatch = Dispatch.make({
        routeOf: (e) => nameOf(e).startsWith("!") ? Effect.sync(() => void log.push(`route ${nameOf(e)}`)) : Effect.void,
        onEvents: (events) => Effect.sync(() => void log.push(`step ${events.map(nameOf).join(",")}`))
      })
      yield* dispatch(["a", "b", "!c", "d", "!e", "f", "g"].map(event))
      expect(log).toEqual(["step a,b,!c", "route !c", "step d,!e", "route !e", "step f,g"])
      log.length = 0
      yield* dispatch(["x", "y"].map(event))
      expect(log).toEqual(["step x,y"])
      log.length = 0
      yield* dispatch(["!z"].map(event))
      expect(log).toEqual(["step !z", "route !z"])
    }))

  it.effect("routeOf over a real capture: deltas, results and state changes route nowhere", () =>
    Effect.gen(function*() {
      const routed: Array<string> = []
      const note = (what: string) => () => Effect.sync(() => void routed.push(what))
      const routeOf = Dispatch.routeOf({
        control: { onResponse: note("control_response") },
        requests: { onRequest: note("control_request"), onCancel: note("cancel"), onUnknown: note("unknown request") },
        trace: { onMessage: (m) => Effect.sync(() => void routed.push(m.type)) },
        onInit: note("init"),
        taskManager: Option.none()
      })
      const lines = Fs.readFileSync(Path.join(fixtures, "two-tools.ndjson"), "utf8").split("\n").filter(Boolean)
      const events = lines.map((line, i) => CliMessage.decodeLine(line, i + 1))
      let unrouted = 0
      for (const e of events) {
        const route = routeOf(e)
        if (route === Effect.void) unrouted++
        else yield* route
      }
      expect(routed).toContain("init")
      expect(routed).toContain("assistant")
      expect(routed.filter((r) => r === "control_response" || r === "init" || r === "assistant" || r === "user")).toEqual(routed)
      const streamEvents = events.filter((e) => e._tag === "Message" && e.message.type === "stream_event").length
      expect(unrouted).toBeGreaterThanOrEqual(streamEvents)
      expect(streamEvents).toBeGreaterThan(0)
    }))
})
