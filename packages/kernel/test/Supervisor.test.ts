import { describe, expect, it } from "@effect/vitest"
import { Cause, Chunk, Deferred, Duration, Effect, Exit, Fiber, Option, Queue, Ref, Schedule, Scope, Stream, TestClock } from "effect"
import * as Actor from "../src/Actor.js"
import * as Supervisor from "../src/Supervisor.js"

const makeLog = Ref.make<ReadonlyArray<string>>([])
const append = (log: Ref.Ref<ReadonlyArray<string>>, entry: string) => Ref.update(log, (l) => [...l, entry])

/** A resource in the current scope that logs its acquisition and its release. */
const resource = (log: Ref.Ref<ReadonlyArray<string>>, name: string) =>
  Effect.acquireRelease(append(log, `acquire ${name}`), () => append(log, `release ${name}`))

/** Lets other fibers run for a while, without any clock. */
const settle = Effect.repeatN(Effect.yieldNow(), 50)

/** Waits until the supervisor's children map satisfies `f`. */
const childrenUntil = (
  supervisor: Supervisor.Supervisor["Type"],
  f: (children: ReadonlyMap<string, Supervisor.ChildInfo>) => boolean
) => supervisor.children.changes.pipe(Stream.filter(f), Stream.runHead, Effect.map(Option.getOrThrow))

describe("Supervisor", () => {
  it.scoped("never: a failed child is not restarted and does not escalate", () =>
    Effect.gen(function*() {
      const supervisor = yield* Supervisor.make
      const events = yield* supervisor.subscribe
      const attempts = yield* Ref.make(0)
      yield* supervisor.start("once", Effect.zipRight(Ref.update(attempts, (n) => n + 1), Effect.fail("no")), Supervisor.never)
      yield* childrenUntil(supervisor, (c) => c.size === 0)
      yield* TestClock.adjust(Duration.hours(1))
      expect(yield* Ref.get(attempts)).toBe(1)
      const seen = Chunk.toReadonlyArray(yield* Queue.takeAll(events))
      expect(seen.map((e) => e._tag)).toEqual(["ChildStarted", "ChildExited", "ChildRemoved"])
      const exited = seen[1]!
      expect(exited._tag === "ChildExited" && Exit.isFailure(exited.exit)).toBe(true)
      const own = yield* Effect.fork(supervisor.join)
      yield* settle
      expect(Option.isNone(yield* Fiber.poll(own))).toBe(true)
    }))

  it.scoped("always: restarts after success too, with exponential backoff, then escalates", () =>
    Effect.gen(function*() {
      const supervisor = yield* Supervisor.make
      const starts = yield* Queue.unbounded<number>()
      let n = 0
      yield* supervisor.start(
        "loop",
        Effect.suspend(() => Queue.offer(starts, ++n)),
        Supervisor.always({ base: Duration.seconds(1), factor: 2, maxRestarts: 2 })
      )
      expect(yield* Queue.take(starts)).toBe(1)
      yield* TestClock.adjust(Duration.millis(999))
      expect(yield* Queue.size(starts)).toBe(0)
      yield* TestClock.adjust(Duration.millis(1))
      expect(yield* Queue.take(starts)).toBe(2)
      yield* TestClock.adjust(Duration.seconds(2))
      expect(yield* Queue.take(starts)).toBe(3)
      // Budget spent: the third success escalates, with an empty cause.
      const escalated = yield* Effect.flip(supervisor.join)
      expect(escalated.key).toBe("loop")
      expect(Cause.isEmpty(escalated.cause)).toBe(true)
    }))

  it.scoped("onFailure: exponential backoff on the clock, a maximum, then Escalated", () =>
    Effect.gen(function*() {
      const supervisor = yield* Supervisor.make
      const starts = yield* Queue.unbounded<number>()
      let n = 0
      yield* supervisor.start(
        "flaky",
        Effect.suspend(() => Queue.offer(starts, ++n)).pipe(Effect.zipRight(Effect.suspend(() => Effect.fail(`failure ${n}`)))),
        Supervisor.onFailure({ base: Duration.seconds(1), factor: 2, maxRestarts: 3 })
      )
      const own = yield* Effect.fork(Effect.flip(supervisor.join))
      expect(yield* Queue.take(starts)).toBe(1)
      // Delays 1 s, 2 s, 4 s.
      for (const [delay, attempt] of [[1, 2], [2, 3], [4, 4]] as const) {
        yield* TestClock.adjust(Duration.millis(delay * 1000 - 1))
        yield* settle
        expect(yield* Queue.size(starts)).toBe(0)
        const children = yield* supervisor.children.get
        expect(children.get("flaky")).toEqual({ key: "flaky", status: "restarting", restarts: attempt - 2 })
        yield* TestClock.adjust(Duration.millis(1))
        expect(yield* Queue.take(starts)).toBe(attempt)
      }
      const escalated = yield* Fiber.join(own)
      expect(escalated).toBeInstanceOf(Supervisor.Escalated)
      expect(escalated.key).toBe("flaky")
      expect(Cause.failureOption(escalated.cause)).toEqual(Option.some("failure 4"))
      expect((yield* supervisor.children.get).size).toBe(0)
      // Escalated: no new children.
      const refused = yield* Effect.flip(supervisor.start("late", Effect.void, Supervisor.never))
      expect(refused._tag).toBe("SupervisorClosed")
    }))

  it.scoped("onFailure: success and interruption from inside are not restarted", () =>
    Effect.gen(function*() {
      const supervisor = yield* Supervisor.make
      const attempts = yield* Ref.make(0)
      const policy = Supervisor.onFailure({ base: Duration.millis(10) })
      yield* supervisor.start("ok", Ref.update(attempts, (n) => n + 1), policy)
      yield* supervisor.start("self-interrupt", Effect.zipRight(Ref.update(attempts, (n) => n + 1), Effect.interrupt), policy)
      yield* childrenUntil(supervisor, (c) => c.size === 0)
      yield* TestClock.adjust(Duration.minutes(1))
      expect(yield* Ref.get(attempts)).toBe(2)
    }))

  it.scoped("resetAfter: an incarnation that ran long enough gets a fresh budget", () =>
    Effect.gen(function*() {
      const supervisor = yield* Supervisor.make
      const starts = yield* Queue.unbounded<number>()
      let n = 0
      yield* supervisor.start(
        "long-lived",
        Effect.suspend(() => Queue.offer(starts, ++n)).pipe(
          Effect.zipRight(Effect.sleep(Duration.minutes(1))),
          Effect.zipRight(Effect.fail("late failure"))
        ),
        Supervisor.onFailure({ base: Duration.seconds(1), maxRestarts: 1, resetAfter: Duration.seconds(30) })
      )
      // Each incarnation lives a minute, so the single allowed restart is never used up.
      for (let attempt = 1; attempt <= 4; attempt++) {
        expect(yield* Queue.take(starts)).toBe(attempt)
        yield* TestClock.adjust(Duration.minutes(1))
        yield* TestClock.adjust(Duration.seconds(1))
      }
      const own = yield* Effect.fork(supervisor.join)
      yield* settle
      expect(Option.isNone(yield* Fiber.poll(own))).toBe(true)
    }))

  it.scoped("a restart awaits the old incarnation's finalizers before starting the next", () =>
    Effect.gen(function*() {
      const supervisor = yield* Supervisor.make
      const log = yield* makeLog
      let n = 0
      yield* supervisor.start(
        "slow-release",
        Effect.gen(function*() {
          const i = ++n
          if (i === 3) return yield* append(log, "acquire 3")
          // The release takes 5 s of clock time: the restart (no delay) must wait for it.
          yield* Effect.acquireRelease(append(log, `acquire ${i}`), () =>
            Effect.sleep(Duration.seconds(5)).pipe(Effect.zipRight(append(log, `release ${i}`))))
          return yield* Effect.fail("again")
        }),
        Supervisor.onFailure({ base: Duration.zero, maxRestarts: 5 })
      )
      yield* settle
      expect(yield* Ref.get(log)).toEqual(["acquire 1"])
      yield* TestClock.adjust(Duration.seconds(5))
      yield* settle
      expect(yield* Ref.get(log)).toEqual(["acquire 1", "release 1", "acquire 2"])
      yield* TestClock.adjust(Duration.seconds(5))
      yield* settle
      expect(yield* Ref.get(log)).toEqual(["acquire 1", "release 1", "acquire 2", "release 2", "acquire 3"])
    }))

  it.scoped("start on a running key stops and awaits the old child first", () =>
    Effect.gen(function*() {
      const supervisor = yield* Supervisor.make
      const log = yield* makeLog
      const child = (name: string) =>
        Effect.acquireRelease(append(log, `acquire ${name}`), () =>
          settle.pipe(Effect.zipRight(append(log, `release ${name}`)))).pipe(Effect.zipRight(Effect.never))
      yield* supervisor.start("k", child("old"), Supervisor.never)
      yield* childrenUntil(supervisor, (c) => c.has("k"))
      yield* settle
      yield* supervisor.start("k", child("new"), Supervisor.never)
      yield* settle
      expect(yield* Ref.get(log)).toEqual(["acquire old", "release old", "acquire new"])
    }))

  it.scoped("stop returns after every finalizer of the child's subtree ran, child-first", () =>
    Effect.gen(function*() {
      const supervisor = yield* Supervisor.make
      const log = yield* makeLog
      const slowRelease = (name: string) =>
        Effect.acquireRelease(append(log, `acquire ${name}`), () =>
          settle.pipe(Effect.zipRight(append(log, `release ${name}`))))
      yield* supervisor.start(
        "mid",
        Supervisor.run((mid) =>
          Effect.gen(function*() {
            yield* slowRelease("mid")
            yield* mid.start("leaf-a", Effect.zipRight(slowRelease("leaf-a"), Effect.never), Supervisor.never)
            yield* mid.start("leaf-b", Effect.zipRight(slowRelease("leaf-b"), Effect.never), Supervisor.never)
          })
        ),
        Supervisor.always()
      )
      yield* settle
      expect((yield* Ref.get(log)).length).toBe(3)
      yield* supervisor.stop("mid")
      // Nothing below ran after stop returned: the log is complete right now.
      const entries = yield* Ref.get(log)
      expect(entries.slice(3).sort()).toEqual(["release leaf-a", "release leaf-b", "release mid"].sort())
      expect(entries.at(-1)).toBe("release mid")
      expect((yield* supervisor.children.get).size).toBe(0)
    }))

  it.effect("interrupting a supervisor runs the finalizers of three levels, child-first", () =>
    Effect.gen(function*() {
      const log = yield* makeLog
      const scope = yield* Scope.make()
      const top = yield* Scope.extend(Supervisor.make, scope)
      yield* top.start(
        "level1",
        Supervisor.run((s1) =>
          Effect.gen(function*() {
            yield* resource(log, "level1")
            yield* s1.start(
              "level2",
              Supervisor.run((s2) =>
                Effect.gen(function*() {
                  yield* resource(log, "level2")
                  yield* s2.start("level3", Effect.zipRight(resource(log, "level3"), Effect.never), Supervisor.always())
                })
              ),
              Supervisor.always()
            )
          })
        ),
        Supervisor.always()
      )
      yield* settle
      expect(yield* Ref.get(log)).toEqual(["acquire level1", "acquire level2", "acquire level3"])
      yield* Scope.close(scope, Exit.void)
      expect(yield* Ref.get(log)).toEqual([
        "acquire level1",
        "acquire level2",
        "acquire level3",
        "release level3",
        "release level2",
        "release level1"
      ])
    }))

  it.scoped("an escalation is a child failure of the parent supervisor, which escalates in turn", () =>
    Effect.gen(function*() {
      const parent = yield* Supervisor.make
      const events = yield* parent.subscribe
      const leafStarts = yield* Ref.make(0)
      yield* parent.start(
        "mid",
        Supervisor.run((mid) =>
          mid.start(
            "leaf",
            Effect.zipRight(Ref.update(leafStarts, (n) => n + 1), Effect.fail("leaf broke")),
            Supervisor.onFailure({ base: Duration.seconds(1), maxRestarts: 1 })
          )
        ),
        Supervisor.onFailure({ base: Duration.seconds(10), maxRestarts: 1 })
      )
      const own = yield* Effect.fork(Effect.flip(parent.join))
      // Leaf: start, 1 s, restart, fails again -> mid escalates -> parent waits 10 s and restarts mid.
      yield* TestClock.adjust(Duration.seconds(1))
      yield* settle
      expect(yield* Ref.get(leafStarts)).toBe(2)
      yield* TestClock.adjust(Duration.seconds(10))
      yield* settle
      expect(yield* Ref.get(leafStarts)).toBe(3)
      yield* TestClock.adjust(Duration.seconds(1))
      const escalated = yield* Fiber.join(own)
      expect(yield* Ref.get(leafStarts)).toBe(4)
      expect(escalated.key).toBe("mid")
      const inner = Cause.failureOption(escalated.cause)
      expect(Option.isSome(inner) && inner.value instanceof Supervisor.Escalated && inner.value.key).toBe("leaf")
      const tags = Chunk.toReadonlyArray(yield* Queue.takeAll(events)).map((e) => e._tag)
      expect(tags).toEqual(["ChildStarted", "ChildExited", "ChildRestarting", "ChildStarted", "ChildExited", "ChildEscalated", "ChildRemoved"])
    }))

  it.scoped("supervises an actor's run loop: a handler failure restarts it with fresh state", () =>
    Effect.gen(function*() {
      const supervisor = yield* Supervisor.make
      const { actor, run } = yield* Actor.unstarted({
        initial: 0,
        name: "counter",
        handle: (n: number, msg: { readonly _tag: "Inc" } | { readonly _tag: "Crash" } | { readonly _tag: "Get"; readonly reply: Actor.Reply<number> }) =>
          msg._tag === "Inc"
            ? Effect.succeed(n + 1)
            : msg._tag === "Crash"
            ? Effect.fail("crash")
            : Effect.as(msg.reply.succeed(n), n)
      })
      const events = yield* actor.subscribe
      yield* supervisor.start("counter", run, Supervisor.onFailure({ base: Duration.seconds(1) }))
      yield* actor.tell({ _tag: "Inc" })
      yield* actor.tell({ _tag: "Inc" })
      expect(yield* actor.ask<number>((reply) => ({ _tag: "Get", reply }))).toBe(2)
      yield* actor.tell({ _tag: "Crash" })
      yield* actor.tell({ _tag: "Inc" })
      yield* actor.status.changes.pipe(Stream.filter((s) => s._tag === "Died"), Stream.runHead)
      // Dead during the backoff: asks fail at once, tells queue for the next incarnation.
      expect((yield* Effect.flip(actor.ask<number>((reply) => ({ _tag: "Get", reply }))))._tag).toBe("ActorDied")
      yield* TestClock.adjust(Duration.seconds(1))
      yield* actor.status.changes.pipe(Stream.filter((s) => s._tag === "Running"), Stream.runHead)
      expect(yield* actor.ask<number>((reply) => ({ _tag: "Get", reply }))).toBe(1)
      const tags = Chunk.toReadonlyArray(yield* Queue.takeAll(events)).map((e) => e._tag)
      expect(tags).toEqual(["Started", "Died", "Restarted"])
    }))

  it.scoped("children are observable", () =>
    Effect.gen(function*() {
      const supervisor = yield* Supervisor.make
      const gate = yield* Deferred.make<void>()
      yield* supervisor.start("a", Deferred.await(gate), Supervisor.never)
      yield* supervisor.start("b", Effect.never, Supervisor.always())
      const both = yield* childrenUntil(supervisor, (c) => c.size === 2)
      expect([...both.values()]).toEqual([
        { key: "a", status: "running", restarts: 0 },
        { key: "b", status: "running", restarts: 0 }
      ])
      yield* Deferred.succeed(gate, undefined)
      const onlyB = yield* childrenUntil(supervisor, (c) => c.size === 1)
      expect([...onlyB.keys()]).toEqual(["b"])
      yield* supervisor.stop("b")
      expect((yield* supervisor.children.get).size).toBe(0)
    }))
})

/** Advances the TestClock a second at a time, at most `limit` times, until `done` holds. */
const tickUntil = (done: Effect.Effect<boolean>, limit: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < limit && !(yield* done); i++) yield* TestClock.adjust(Duration.seconds(1))
    return yield* done
  })

/** The delays of every `ChildRestarting` taken from `events` so far, in millis, appended to `into`. */
const drainDelays = (events: Queue.Dequeue<Supervisor.Event>, into: Array<number>) =>
  Effect.map(Queue.takeAll(events), (chunk) => {
    for (const e of chunk) if (e._tag === "ChildRestarting") into.push(Duration.toMillis(e.delay))
    return into.length
  })

/** As SupervisedSession's `restart: true`: 5 restarts in 60 s, 200 ms doubling up to 5 s, healthy after 60 s up. */
const sessionLike = Supervisor.onFailure({
  maxRestarts: 5,
  period: Duration.seconds(60),
  base: Duration.millis(200),
  maxDelay: Duration.seconds(5),
  resetAfter: Duration.seconds(60)
})

describe("failure 9: SupervisedSession hides why it stopped, and counts restarts over its whole life", () => {
  it.scoped("failure 9: a child killed every 20 s that completes a turn first restarts forever, always after the base delay", () =>
    Effect.gen(function*() {
      const supervisor = yield* Supervisor.make
      const events = yield* supervisor.subscribe
      const child = Effect.gen(function*() {
        const incarnation = yield* Supervisor.Incarnation
        yield* Effect.sleep(Duration.seconds(5)) // a turn
        yield* incarnation.healthy
        yield* Effect.sleep(Duration.seconds(15))
        return yield* Effect.fail(`killed in incarnation ${incarnation.restarts}`)
      })
      yield* supervisor.start("cli", child, sessionLike)
      const own = yield* Effect.fork(supervisor.join)
      const delays: Array<number> = []
      // 30 restarts: about 10 minutes of clock, far past "5 in the whole life".
      expect(yield* tickUntil(Effect.map(drainDelays(events, delays), (n) => n >= 30), 1500)).toBe(true)
      expect(new Set(delays)).toEqual(new Set([200]))
      expect(Option.isNone(yield* Fiber.poll(own))).toBe(true)
      expect((yield* supervisor.children.get).get("cli")?.restarts).toBeGreaterThanOrEqual(29)
    }))

  it.scoped("failure 9: without a healthy run the backoff grows to its cap, and a slow crasher still runs forever", () =>
    Effect.gen(function*() {
      const supervisor = yield* Supervisor.make
      const events = yield* supervisor.subscribe
      yield* supervisor.start("cli", Effect.zipRight(Effect.sleep(Duration.seconds(20)), Effect.fail("killed")), sessionLike)
      const own = yield* Effect.fork(supervisor.join)
      const delays: Array<number> = []
      expect(yield* tickUntil(Effect.map(drainDelays(events, delays), (n) => n >= 12), 1000)).toBe(true)
      expect(delays.slice(0, 12)).toEqual([200, 400, 800, 1600, 3200, 5000, 5000, 5000, 5000, 5000, 5000, 5000])
      expect(Option.isNone(yield* Fiber.poll(own))).toBe(true)
    }))

  it.scoped("failure 9: healthy resets the backoff: after a healthy run the next delay is the base again", () =>
    Effect.gen(function*() {
      const supervisor = yield* Supervisor.make
      const events = yield* supervisor.subscribe
      // Incarnations 0–3 crash at once; 4 completes a turn; 5 and 6 crash at once again.
      const child = Effect.gen(function*() {
        const incarnation = yield* Supervisor.Incarnation
        if (incarnation.restarts === 4) yield* incarnation.healthy
        return yield* Effect.fail("crash")
      })
      yield* supervisor.start("cli", child, Supervisor.onFailure({ base: Duration.seconds(1), maxRestarts: 100, period: Duration.hours(1) }))
      const delays: Array<number> = []
      expect(yield* tickUntil(Effect.map(drainDelays(events, delays), (n) => n >= 7), 200)).toBe(true)
      expect(delays.slice(0, 7)).toEqual([1000, 2000, 4000, 8000, 1000, 2000, 4000])
    }))

  it.scoped("failure 9: 5 in 60 s is a sliding window: after a quiet spell restarts are allowed again; 6 within 60 s escalate with the last failure", () =>
    Effect.gen(function*() {
      const intensity = { base: Duration.seconds(11), factor: 1, maxRestarts: 5, period: Duration.seconds(60) }
      // 5 restarts 11 s apart, a quiet 2 minutes, then a 6th and a 7th: never 6 within 60 s.
      let burstStarts = 0
      const burst = Effect.suspend(() => {
        const n = ++burstStarts
        return n === 6 ? Effect.zipRight(Effect.sleep(Duration.minutes(2)), Effect.fail("late")) : n === 7 ? Effect.never : Effect.fail("early")
      })
      const quiet = yield* Supervisor.make
      yield* quiet.start("burst", burst, Supervisor.onFailure(intensity))
      const quietJoin = yield* Effect.fork(quiet.join)
      // Fails at once every time: the 6th restart would be the 6th within 60 s.
      let fastStarts = 0
      const fast = yield* Supervisor.make
      yield* fast.start("fast", Effect.suspend(() => Effect.fail(`fast failure ${++fastStarts}`)), Supervisor.onFailure(intensity))
      const fastJoin = yield* Effect.fork(Effect.flip(fast.join))

      expect(yield* tickUntil(Effect.map(Fiber.poll(fastJoin), Option.isSome), 120)).toBe(true)
      const escalated = yield* Fiber.join(fastJoin)
      expect(fastStarts).toBe(6)
      expect(Cause.failureOption(escalated.cause)).toEqual(Option.some("fast failure 6"))
      expect(yield* tickUntil(Effect.sync(() => burstStarts === 7), 300)).toBe(true)
      expect(Option.isNone(yield* Fiber.poll(quietJoin))).toBe(true)
    }))

  it.scoped("failure 9: fromSchedule takes an intensity too", () =>
    Effect.gen(function*() {
      const supervisor = yield* Supervisor.make
      let starts = 0
      yield* supervisor.start(
        "spaced",
        Effect.suspend(() => Effect.fail(`failure ${++starts}`)),
        Supervisor.fromSchedule("failure", Schedule.spaced(Duration.seconds(1)), {
          intensity: { maxRestarts: 3, period: Duration.seconds(60) }
        })
      )
      const escalated = yield* Effect.fork(Effect.flip(supervisor.join))
      expect(yield* tickUntil(Effect.map(Fiber.poll(escalated), Option.isSome), 30)).toBe(true)
      expect(starts).toBe(4)
    }))

  it.scoped("failure 9: escalateWhen: a failure a retry cannot fix escalates at once, with that failure", () =>
    Effect.gen(function*() {
      const supervisor = yield* Supervisor.make
      const attempts = yield* Ref.make(0)
      const failures = ["transient", "transient", "fatal"]
      const child = Effect.flatMap(Ref.updateAndGet(attempts, (n) => n + 1), (n) => Effect.fail(failures[n - 1]))
      yield* supervisor.start(
        "cli",
        child,
        Supervisor.escalateWhen(
          Supervisor.onFailure({ base: Duration.seconds(1), maxRestarts: 5, period: Duration.seconds(60) }),
          (error) => error === "fatal"
        )
      )
      const own = yield* Effect.fork(Effect.flip(supervisor.join))
      // Two ordinary restarts (1 s, 2 s), then the fatal failure escalates without a delay.
      yield* TestClock.adjust(Duration.seconds(1))
      yield* TestClock.adjust(Duration.seconds(2))
      const escalated = yield* Fiber.join(own)
      expect(yield* Ref.get(attempts)).toBe(3)
      expect(Cause.failureOption(escalated.cause)).toEqual(Option.some("fatal"))
    }))
})
