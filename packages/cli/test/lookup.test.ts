/**
 * Issue 25: a unique start of an id names it, as `show` prints ids (8 characters).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import { fail } from "../src/CliError.js"
import * as Lookup from "../src/internal/lookup.js"

const ids = ["4b55569f-7ca4-4869-aa7e-f76513511306", "4b5d0000-0000-4000-8000-000000000000", "d7a705dd-9e21-4468-8133-8bd5b6098496"]
const pick = (query: string) => Lookup.uniquePrefix(query, ids, (id) => id, "session ids")

describe("Lookup.uniquePrefix", () => {
  it.effect("a unique start of an id (8 characters, as show prints) names it; a whole id names itself; no match is none", () =>
    Effect.gen(function*() {
      expect(yield* pick("4b55569f")).toEqual(Option.some(ids[0]))
      expect(yield* pick("d7a7")).toEqual(Option.some(ids[2]))
      expect(yield* pick(ids[1]!)).toEqual(Option.some(ids[1]))
      expect(yield* pick("ffff")).toEqual(Option.none())
    }))

  it.effect("a start that several ids share is an error that names them", () =>
    Effect.gen(function*() {
      expect(yield* Effect.exit(pick("4b5"))).toEqual(
        Exit.fail(fail(`"4b5" is the start of 2 session ids (${ids[0]}, ${ids[1]}): type more of it`))
      )
    }))
})
