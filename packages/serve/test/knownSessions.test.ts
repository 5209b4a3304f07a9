/**
 * The served sessions' catalog alone, over a stub of the index's listing.
 */
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Ids } from "@skein/canonical"
import * as KnownSessions from "../src/internal/knownSessions.js"

const cliId = "5e55a1d0-0000-4000-8000-00000000a001"


it.effect("transcripts are found by a lookup that misses, titled by their first prompt, and their mtime moves forward only", () =>
  Effect.gen(function*() {
    let mtime = 2_000
    const index: KnownSessions.Listing = {
      list: () => Effect.sync(() => [{ sessionId: cliId, cwd: "/work/app", firstPrompt: "fix the bug", mtime: new Date(mtime) }])
    }
    const catalog = KnownSessions.make(index, "/default")
    const found = yield* catalog.lookup(Ids.session(cliId))
    expect(found).toMatchObject({ cliSessionId: cliId, directory: "/work/app", title: "fix the bug", created: 2_000 })
    mtime = 1_000
    yield* catalog.refresh
    expect((yield* catalog.lookup(Ids.session(cliId))).updated).toBe(2_000)
    mtime = 3_000
    expect((yield* catalog.list("/work/app")).map(([, k]) => k.updated)).toEqual([3_000])
    expect(yield* catalog.list("/elsewhere")).toEqual([])
  }))

it.effect("a session the server created is known without a transcript; an unknown id is SessionNotFound", () =>
  Effect.gen(function*() {
    const catalog = KnownSessions.make({ list: () => Effect.succeed([]) }, "/d")
    yield* catalog.add("ses_created", { cliSessionId: "c", directory: "/d", title: "t", created: 1, updated: 1 })
    expect((yield* catalog.lookup("ses_created")).title).toBe("t")
    expect((yield* Effect.flip(catalog.lookup("ses_missing")))._tag).toBe("SessionNotFound")
  }))
