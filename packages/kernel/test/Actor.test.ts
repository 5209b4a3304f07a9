import { describe, expect, it } from "@effect/vitest"
import { Cause, Chunk, Deferred, Effect, Exit, Fiber, Option, Queue, Scope, Stream } from "effect"
import * as Actor from "../src/Actor.js"

type Msg =
  | { readonly _tag: "Add"; readonly n: number }
  | { readonly _tag: "Block"; readonly started: Deferred.Deferred<void>; readonly release: Deferred.Deferred<void> }
  | { readonly _tag: "Get"; readonly reply: Actor.Reply<ReadonlyArray<number>> }
  | { readonly _tag: "Divide"; readonly by: number; readonly reply: Actor.Reply<number, string> }
  | { readonly _tag: "Boom" }

const handle = (state: ReadonlyArray<number>, msg: Msg): Effect.Effect<ReadonlyArray<number>, string> => {
  switch (msg._tag) {
    case "Add":
      return Effect.succeed([...state, msg.n])
    case "Block":
      return Deferred.succeed(msg.started, undefined).pipe(
        Effect.zipRight(Deferred.await(msg.release)),
        Effect.as(state)
      )
    case "Get":
      return Effect.as(msg.reply.succeed(state), state)
    case "Divide":
      return Effect.as(
        msg.by === 0 ? msg.reply.fail("division by zero") : msg.reply.succeed(100 / msg.by),
        state
      )
    case "Boom":
      return Effect.fail("boom")
  }
}

const initial: ReadonlyArray<number> = []

/** Sends a Block message and waits until the handler is inside it. */
const block = (actor: Actor.Actor<ReadonlyArray<number>, Msg>) =>
  Effect.gen(function*() {
    const started = yield* Deferred.make<void>()
    const release = yield* Deferred.make<void>()
    expect(yield* actor.tell({ _tag: "Block", started, release })).toBe(true)
    yield* Deferred.await(started)
    return release
  })

/** The state once it holds `n` numbers (without sending a message that could overflow). */
const settled = (actor: Actor.Actor<ReadonlyArray<number>, Msg>, n: number) =>
  actor.state.changes.pipe(Stream.filter((s) => s.length >= n), Stream.runHead, Effect.map(Option.getOrThrow))

const get = { _tag: "Get" } as const
const getState = (reply: Actor.Reply<ReadonlyArray<number>>): Msg => ({ ...get, reply })

describe("Actor", () => {
  it.scoped("handles messages in order and exposes its state", () =>
    Effect.gen(function*() {
      const actor = yield* Actor.make({ initial, handle, name: "order" })
      const changes = yield* actor.state.changes.pipe(
        Stream.takeUntil((s) => s.length === 200),
        Stream.runCollect,
        Effect.fork
      )
      for (let n = 1; n <= 200; n++) yield* actor.tell({ _tag: "Add", n })
      const state = yield* actor.ask(getState)
      expect(state).toEqual(Array.from({ length: 200 }, (_, i) => i + 1))
      expect(yield* actor.state.get).toEqual(state)
      // Each change is published: lengths grow by one up to 200.
      const lengths = Chunk.toReadonlyArray(yield* Fiber.join(changes)).map((s) => s.length)
      expect(lengths.at(-1)).toBe(200)
      expect(lengths.every((n, i) => i === 0 || n === lengths[i - 1]! + 1)).toBe(true)
      expect((yield* actor.status.get)._tag).toBe("Running")
    }))

  it.scoped("ask returns the handler's reply, success or typed failure", () =>
    Effect.gen(function*() {
      const actor = yield* Actor.make({ initial, handle })
      expect(yield* actor.ask<number, string>((reply) => ({ _tag: "Divide", by: 4, reply }))).toBe(25)
      const failed = yield* Effect.flip(actor.ask<number, string>((reply) => ({ _tag: "Divide", by: 0, reply })))
      expect(failed).toBe("division by zero")
    }))

  it.scoped("dropping: a full mailbox refuses tells and fails asks with MailboxFull", () =>
    Effect.gen(function*() {
      const actor = yield* Actor.make({ initial, handle, capacity: 2, overflow: "dropping" })
      const release = yield* block(actor)
      expect(yield* actor.tell({ _tag: "Add", n: 1 })).toBe(true)
      expect(yield* actor.tell({ _tag: "Add", n: 2 })).toBe(true)
      expect(yield* actor.tell({ _tag: "Add", n: 3 })).toBe(false)
      const full = yield* Effect.flip(actor.ask(getState))
      expect(full._tag).toBe("MailboxFull")
      yield* Deferred.succeed(release, undefined)
      expect(yield* settled(actor, 2)).toEqual([1, 2])
    }))

  it.scoped("sliding: the oldest message is evicted, and an evicted ask fails with MailboxFull", () =>
    Effect.gen(function*() {
      const actor = yield* Actor.make({ initial, handle, capacity: 2, overflow: "sliding" })
      const release = yield* block(actor)
      expect(yield* actor.tell({ _tag: "Add", n: 1 })).toBe(true)
      expect(yield* actor.tell({ _tag: "Add", n: 2 })).toBe(true)
      // Mailbox [1, 2]: the ask evicts 1.
      const asked = yield* Effect.fork(Effect.flip(actor.ask(getState)))
      yield* Effect.yieldNow()
      // [2, ask] -> [ask, 3] -> [3, 4]: the ask is evicted.
      expect(yield* actor.tell({ _tag: "Add", n: 3 })).toBe(true)
      expect(yield* actor.tell({ _tag: "Add", n: 4 })).toBe(true)
      expect((yield* Fiber.join(asked))._tag).toBe("MailboxFull")
      yield* Deferred.succeed(release, undefined)
      expect(yield* settled(actor, 2)).toEqual([3, 4])
    }))

  it.scoped("suspend: a full mailbox makes tell wait for room (backpressure)", () =>
    Effect.gen(function*() {
      const actor = yield* Actor.make({ initial, handle, capacity: 1, overflow: "suspend" })
      const release = yield* block(actor)
      expect(yield* actor.tell({ _tag: "Add", n: 1 })).toBe(true)
      const waiting = yield* Effect.fork(actor.tell({ _tag: "Add", n: 2 }))
      yield* Effect.yieldNow()
      yield* Effect.yieldNow()
      expect(Option.isNone(yield* Fiber.poll(waiting))).toBe(true)
      yield* Deferred.succeed(release, undefined)
      expect(yield* Fiber.join(waiting)).toBe(true)
      expect(yield* actor.ask(getState)).toEqual([1, 2])
    }))

  it.scoped("closing its scope stops it: every pending ask fails with ActorStopped, in flight and queued", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const interrupted = yield* Deferred.make<void>()
      const started = yield* Deferred.make<void>()
      const actor = yield* Scope.extend(
        Actor.make({
          initial,
          name: "stopper",
          // Blocks forever on the first message; the finalizer proves the fiber is interrupted.
          handle: (state: ReadonlyArray<number>, _: Msg) =>
            Deferred.succeed(started, undefined).pipe(
              Effect.zipRight(Effect.never),
              Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined)),
              Effect.as(state)
            )
        }),
        scope
      )
      const events = yield* actor.subscribe
      const inFlight = yield* Effect.fork(Effect.flip(actor.ask(getState)))
      yield* Deferred.await(started)
      const queued = yield* Effect.forEach([1, 2], () => Effect.fork(Effect.flip(actor.ask(getState))))
      yield* Effect.yieldNow()
      yield* Scope.close(scope, Exit.void)
      const asks = [inFlight, ...queued]
      for (const fiber of asks) {
        const error = yield* Fiber.join(fiber)
        expect(error).toEqual(new Actor.ActorStopped({ actor: "stopper" }))
      }
      expect(yield* Deferred.isDone(interrupted)).toBe(true)
      expect((yield* actor.status.get)._tag).toBe("Stopped")
      expect(yield* actor.tell({ _tag: "Add", n: 1 })).toBe(false)
      expect((yield* Effect.flip(actor.ask(getState)))._tag).toBe("ActorStopped")
      const seen = Chunk.toReadonlyArray(yield* Queue.takeAll(events)).map((e) => e._tag)
      expect(seen).toEqual(["Stopped"])
    }))

  it.scoped("stop interrupts the fiber, fails queued asks and suspended offers", () =>
    Effect.gen(function*() {
      const actor = yield* Actor.make({ initial, handle, capacity: 1 })
      const release = yield* block(actor)
      const queued = yield* Effect.fork(Effect.flip(actor.ask(getState)))
      yield* Effect.yieldNow()
      // The mailbox holds the ask; this one waits for room in a suspended offer.
      const suspended = yield* Effect.fork(Effect.flip(actor.ask(getState)))
      const tell = yield* Effect.fork(actor.tell({ _tag: "Add", n: 1 }))
      yield* Effect.yieldNow()
      yield* actor.stop
      expect((yield* Fiber.join(queued))._tag).toBe("ActorStopped")
      expect((yield* Fiber.join(suspended))._tag).toBe("ActorStopped")
      expect(yield* Fiber.join(tell)).toBe(false)
      expect(yield* Deferred.isDone(release)).toBe(false)
    }))

  it.scoped("a failing handler kills the actor: ActorDied for the ask and the queue behind it", () =>
    Effect.gen(function*() {
      const actor = yield* Actor.make({ initial, handle, name: "doomed" })
      const events = yield* actor.subscribe
      const release = yield* block(actor)
      yield* actor.tell({ _tag: "Boom" })
      const behind = yield* Effect.fork(Effect.flip(actor.ask(getState)))
      yield* Effect.yieldNow()
      yield* Deferred.succeed(release, undefined)
      const died = yield* Fiber.join(behind)
      expect(died._tag).toBe("ActorDied")
      if (died._tag === "ActorDied") {
        expect(Cause.failureOption(died.cause)).toEqual(Option.some("boom"))
      }
      const status = yield* actor.status.get
      expect(status._tag).toBe("Died")
      // Dead for good: later tells are refused, later asks fail at once with the cause.
      expect(yield* actor.tell({ _tag: "Add", n: 1 })).toBe(false)
      const later = yield* Effect.flip(actor.ask(getState))
      expect(later._tag).toBe("ActorDied")
      const seen = Chunk.toReadonlyArray(yield* Queue.takeAll(events)).map((e) => e._tag)
      // `make` returns once the actor runs, so a later subscriber never sees Started.
      expect(seen).toEqual(["Died"])
    }))

  it.scoped("ask whose own message kills the handler fails with ActorDied", () =>
    Effect.gen(function*() {
      const actor = yield* Actor.make({
        initial: 0,
        handle: (n: number, msg: { readonly reply: Actor.Reply<number> }) =>
          n >= 1 ? Effect.die(new Error("second message")) : Effect.as(msg.reply.succeed(n), n + 1)
      })
      expect(yield* actor.ask<number>((reply) => ({ reply }))).toBe(0)
      const error = yield* Effect.flip(actor.ask<number>((reply) => ({ reply })))
      expect(error._tag).toBe("ActorDied")
      if (error._tag === "ActorDied") expect(Cause.isDie(error.cause)).toBe(true)
    }))

  it.scoped("unstarted: a rerun restarts with fresh state, keeps the mailbox and skips failed asks", () =>
    Effect.gen(function*() {
      const { actor, run } = yield* Actor.unstarted({ initial, handle, name: "phoenix" })
      const events = yield* actor.subscribe
      // Queued before the first start.
      yield* actor.tell({ _tag: "Add", n: 1 })
      const early = yield* Effect.fork(actor.ask(getState))
      yield* Effect.yieldNow()
      expect((yield* actor.status.get)._tag).toBe("Idle")
      const first = yield* Effect.fork(run)
      expect(yield* Fiber.join(early)).toEqual([1])
      yield* actor.tell({ _tag: "Add", n: 2 })
      yield* actor.tell({ _tag: "Boom" })
      const queuedBehindBoom = yield* Effect.fork(Effect.flip(actor.ask(getState)))
      yield* actor.tell({ _tag: "Add", n: 3 })
      const exit = yield* Fiber.await(first)
      expect(Exit.isFailure(exit)).toBe(true)
      expect((yield* Fiber.join(queuedBehindBoom))._tag).toBe("ActorDied")
      expect((yield* actor.state.get)).toEqual([1, 2])
      // Restart: fresh state, the tell queued behind the failure is still handled.
      yield* Effect.fork(run)
      // Between incarnations asks fail fast; wait for the restart.
      yield* actor.status.changes.pipe(Stream.filter((s) => s._tag === "Running"), Stream.runHead)
      const state = yield* actor.ask(getState)
      expect(state).toEqual([3])
      const seen = Chunk.toReadonlyArray(yield* Queue.takeAll(events)).map((e) => e._tag)
      expect(seen).toEqual(["Started", "Died", "Restarted"])
      expect(yield* actor.status.get).toEqual(Actor.Status.Running({ incarnation: 2 }))
    }))
})
