import { describe, expect, it } from "@effect/vitest"
import { Cause, Chunk, Deferred, Duration, Effect, Exit, Fiber, Option, Queue, Ref, Scope, Stream, TestClock } from "effect"
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
      expect(seen.map((e) => e._tag)).toEqual(["ChildStarted", "ChildExited"])
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
      expect(tags).toEqual(["ChildStarted", "ChildExited", "ChildStarted", "ChildExited", "ChildEscalated"])
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
