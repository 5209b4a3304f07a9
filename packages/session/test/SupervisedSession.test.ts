/**
 * SupervisedSession's policy, with FakeCli: off by default, bounded when on,
 * and an `end` is not a fault.
 */
import { describe, expect, it } from "@effect/vitest"
import { ProcessHost } from "@skein/kernel"
import { FakeCli } from "@skein/testkit"
import { Effect } from "effect"
import * as SupervisedSession from "../src/SupervisedSession.js"
import { fake } from "./fake.js"

describe("SupervisedSession (FakeCli)", () => {
  it.scopedLive("without restart, a crash closes the session", () =>
    Effect.gen(function*() {
      const supervised = yield* SupervisedSession.start(fake(FakeCli.crashMidTurn({ code: 9 })))
      const turn = yield* supervised.send("go")
      expect(yield* Effect.flip(turn.result)).toMatchObject({ _tag: "CliExited", code: 9 })
      expect(yield* Effect.flip(supervised.current)).toMatchObject({ _tag: "SessionClosed" })
      expect(yield* Effect.flip(supervised.send("again"))).toMatchObject({ _tag: "SessionClosed" })
      expect(yield* supervised.restarts.get).toBe(0)
    }).pipe(Effect.provide(ProcessHost.layerMemory())))

  it.scopedLive("restarts are bounded: a CLI that keeps dying closes the session when the policy gives up", () =>
    Effect.gen(function*() {
      // Dies before it answers initialize. `start` does not wait for that answer,
      // so each incarnation comes up and then exits: wait through them.
      const supervised = yield* SupervisedSession.start({
        ...fake([FakeCli.stderr("fake-cli: broken\n"), FakeCli.exit(1)]),
        restart: { maxRestarts: 2, base: "10 millis" }
      })
      const closed = yield* supervised.current.pipe(
        Effect.flatMap((session) => session.exit),
        Effect.zipRight(Effect.sleep("5 millis")),
        Effect.forever,
        Effect.flip
      )
      expect(closed).toMatchObject({ _tag: "SessionClosed" })
      expect(yield* supervised.restarts.get).toBe(2)
    }).pipe(Effect.provide(ProcessHost.layerMemory())))

  it.scopedLive("a CLI that exits because the host ended it is not restarted", () =>
    Effect.gen(function*() {
      const supervised = yield* SupervisedSession.start(
        { ...fake([...FakeCli.textTurn("only turn"), FakeCli.waitForEnd]), restart: true }
      )
      expect((yield* Effect.flatMap(supervised.send("hi"), (t) => t.result)).text).toBe("only turn")
      const session = yield* supervised.current
      yield* supervised.end
      expect((yield* session.exit).code).toBe(0)
      expect(yield* Effect.flip(supervised.current)).toMatchObject({ _tag: "SessionClosed" })
      expect(yield* supervised.restarts.get).toBe(0)
    }).pipe(Effect.provide(ProcessHost.layerMemory())))
})
