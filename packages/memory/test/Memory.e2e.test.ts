/**
 * The three jobs wired to a session's turns, with the real CLI.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { ProcessHost, TaskManager } from "@skein/kernel"
import { Memory, MemoryEvents } from "@skein/memory"
import { Session, Worker } from "@skein/session"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Layer, Queue } from "effect"
import * as Path from "node:path"
import * as Live from "./live.js"

const isExtraction: FakeModel.RequestMatch = (r) =>
  FakeModel.isConversation(r) && FakeModel.messagesText(r).includes("skein memory extraction.")

describe("Memory e2e with the real CLI", () => {
  it.scopedLive("after a turn: extraction runs by itself, the dream stops at a gate, session memory is not due yet", () =>
    Effect.gen(function*() {
      const d = yield* ClaudeCli.offlineDirs("skein-memory-wired-")
      const model = yield* FakeModel.make({
        replies: [FakeModel.matching(FakeModel.text("Nothing worth keeping."), isExtraction)]
      })
      const tasks = yield* TaskManager.make({ root: Path.join(d.root, "tasks") })
      const stores = yield* Live.stores(d)
      const events = yield* MemoryEvents.make
      const seen = yield* events.subscribe
      const launch = Live.launchOf(model, d)
      const parent = yield* Session.start(launch)
      const memory = yield* Effect.gen(function*() {
        const workers = yield* Worker.pool(parent, { launch })
        const memory = yield* Memory.make({ workers, launch })
        yield* memory.afterEachTurn
        return memory
      }).pipe(
        Effect.provide(stores),
        Effect.provideService(TaskManager.TaskManager, tasks),
        Effect.provideService(MemoryEvents.MemoryEvents, events)
      )
      yield* Effect.flatMap(parent.send("hello"), (t) => t.result)
      const got: Array<MemoryEvents.MemoryEvent> = []
      while (!got.some((e) => e.job === "extraction" && e._tag === "Wrote")) {
        const next = yield* Queue.take(seen).pipe(Effect.timeout("15 seconds"), Effect.option)
        // Bounded: a job that never reports fails here, with what did arrive.
        if (next._tag === "None") expect.fail(`no extraction result after 15 s; events: ${JSON.stringify(got)}`)
        got.push(next.value)
      }
      yield* memory.extraction.idle
      got.push(...(yield* Queue.takeAll(seen)))
      expect(got.filter((e) => e.job === "dream")).toMatchObject([{ _tag: "Skipped", gate: "activity" }])
      expect(got.filter((e) => e.job === "extraction").map((e) => e._tag)).toEqual(["Started", "Wrote"])
      expect(got.filter((e) => e.job === "session-memory")).toEqual([])
      expect((yield* tasks.list).map((r) => [r.type, r.status])).toEqual([["local_agent", "completed"]])
    }).pipe(Effect.provide(Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer))), { timeout: 120_000 })
})
