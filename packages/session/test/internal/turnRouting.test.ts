/**
 * Turn routing alone: an event goes to the turn live when it came, else to
 * the one it started; after an event that moves a boundary, the rest of the
 * read goes to the turn the outputs left live.
 */
import { describe, expect, it } from "@effect/vitest"
import { CliMessage } from "@skein/protocol"
import { Effect } from "effect"
import type { SessionEvent } from "../../src/Turn.js"
import * as TurnRouting from "../../src/internal/turnRouting.js"

const event = (name: string): SessionEvent => CliMessage.decodeLine(name, 1)
const nameOf = (e: SessionEvent) => (e._tag === "Unparseable" ? e.raw : e._tag)

describe("turnRouting", () => {
  it.effect("before, at and after the boundaries of two turns in one read", () =>
    Effect.gen(function*() {
      let current: string | undefined
      const offered: Array<string> = []
      const applied: Array<string> = []
      // `start:T` starts turn T, `end` ends the live one; the rest change nothing.
      const route = TurnRouting.routeEvents<string, string>({
        step: (e) => {
          const name = nameOf(e)
          return name.startsWith("start:") || name === "end" ? [name] : []
        },
        current: () => current,
        offer: (turn, e) => void offered.push(`${nameOf(e)}→${turn}`),
        apply: (outputs) =>
          Effect.sync(() => {
            for (const o of outputs) {
              applied.push(o)
              current = o === "end" ? undefined : o.slice("start:".length)
            }
          })
      })
      yield* route(["stray", "start:A", "a1", "end", "between", "start:B", "b1"].map(event))
      expect(applied).toEqual(["start:A", "end", "start:B"])
      expect(offered).toEqual(["start:A→A", "a1→A", "end→A", "start:B→B", "b1→B"])
      expect(current).toBe("B")
    }))
})
