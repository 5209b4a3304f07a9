/**
 * Kill is interruption: interrupting the top of a supervision tree three levels
 * deep, whose members own real processes (each with background grandchildren),
 * leaves no process alive.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Duration, Effect, Exit, Fiber, Option, Ref, Stream, SubscriptionRef } from "effect"
import * as NodeFs from "node:fs"
import * as Actor from "../src/Actor.js"
import * as ProcessHost from "../src/ProcessHost.js"
import * as Supervisor from "../src/Supervisor.js"

interface Proc {
  readonly owner: string
  readonly pid: number
  readonly role: "child" | "grandchild"
}

/** Two background sleeps whose pids it prints, then `ready`; `trapTerm` makes all three ignore SIGTERM. */
const script = (trapTerm: boolean) =>
  `${trapTerm ? "trap '' TERM; " : ""}sleep 1000 & echo $!; sleep 1000 & echo $!; echo ready; wait`

type ProcState = "running" | "gone" | "orphan-zombie" | "our-zombie"

/**
 * `process.kill(pid, 0)` throws ESRCH once a process is gone. A killed
 * grandchild whose shell died is a zombie until init reaps it, which some
 * inits (this sandbox's) do only every second or so; a zombie of ours would
 * mean a child nobody awaited. The states tell these apart in failures.
 */
const procState = (pid: number): ProcState => {
  try {
    process.kill(pid, 0)
  } catch (error) {
    if (error instanceof Error && "code" in error && error.code === "ESRCH") return "gone"
    throw error
  }
  let stat: string
  try {
    stat = NodeFs.readFileSync(`/proc/${pid}/stat`, "utf8")
  } catch {
    return "gone"
  }
  const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  if (state !== "Z") return "running"
  return Number(ppid) === process.pid ? "our-zombie" : "orphan-zombie"
}

/**
 * SIGKILL lands asynchronously and init reaps orphans when it gets to it: poll
 * on real timers until every pid is gone, up to a bound well above the reaper's
 * period. Nothing is asserted about the time it takes.
 */
const settled = (pids: ReadonlyArray<number>) =>
  Effect.promise(async () => {
    for (let i = 0; i < 1500 && pids.some((pid) => procState(pid) !== "gone"); i++) {
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  })

const killQuietly = (pid: number) => {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, "SIGKILL")
    } catch {
      // already gone
    }
  }
}

const hostLayer = ProcessHost.layerMemory({
  stopTimeouts: { stdinGrace: Duration.millis(100), termGrace: Duration.millis(300) }
})

describe("supervision tree over real processes", () => {
  it.scopedLive("interrupting the top supervisor leaves no child or grandchild process alive", () =>
    Effect.gen(function*() {
      const procs = yield* SubscriptionRef.make<ReadonlyArray<Proc>>([])
      const record = (proc: Proc) => SubscriptionRef.update(procs, (all) => [...all, proc])
      // Whatever happens to the test, nothing it started outlives it.
      yield* Effect.addFinalizer(() => Effect.map(SubscriptionRef.get(procs), (all) => all.forEach((p) => killQuietly(p.pid))))

      /** A process in the current Scope, with two background grandchildren. */
      const owned = (owner: string, trapTerm = false) =>
        Effect.gen(function*() {
          const child = yield* ProcessHost.spawn({ command: "sh", args: ["-c", script(trapTerm)], label: owner })
          yield* record({ owner, pid: child.pid, role: "child" })
          const lines = yield* child.stdout.pipe(
            Stream.decodeText(),
            Stream.splitLines,
            Stream.takeUntil((line) => line === "ready"),
            Stream.runCollect
          )
          for (const line of Chunk.toReadonlyArray(lines)) {
            if (line !== "ready") yield* record({ owner, pid: Number(line), role: "grandchild" })
          }
          return child
        })

      // A leaf actor that spawns processes on request, into its own incarnation's Scope.
      type SpawnRequest = { readonly owner: string; readonly reply: Actor.Reply<number> }
      const actorLeaf = Effect.gen(function*() {
        const actor = yield* Actor.make({
          initial: 0,
          name: "spawner",
          handle: (count: number, request: SpawnRequest) =>
            owned(request.owner).pipe(
              Effect.flatMap((child) => request.reply.succeed(child.pid)),
              Effect.orDie,
              Effect.as(count + 1)
            )
        })
        yield* actor.ask<number>((reply) => ({ owner: "level3-z/1", reply }))
        yield* actor.ask<number>((reply) => ({ owner: "level3-z/2", reply }))
        return yield* Effect.never
      })

      const always = Supervisor.always({ base: Duration.millis(10) })
      const level2a = Supervisor.run((s) =>
        Effect.gen(function*() {
          yield* owned("level2-a")
          yield* s.start("level3-x", Effect.zipRight(owned("level3-x"), Effect.never), always)
          // Ignores SIGTERM, grandchildren included: only the SIGKILL ends it.
          yield* s.start("level3-y", Effect.zipRight(owned("level3-y", true), Effect.never), always)
        })
      )
      const level2b = Supervisor.run((s) => s.start("level3-z", actorLeaf, always))
      const level1 = Supervisor.run((s) =>
        Effect.gen(function*() {
          yield* owned("level1")
          yield* s.start("level2-a", level2a, always)
          yield* s.start("level2-b", level2b, always)
        })
      )
      const restarts = yield* Ref.make(0)
      const top = yield* Supervisor.run((s) =>
        Effect.gen(function*() {
          const events = yield* s.subscribe
          yield* Effect.forkScoped(
            Effect.forever(Effect.flatMap(events.take, (e) => e._tag === "ChildStarted" && e.restarts > 0 ? Ref.update(restarts, (n) => n + 1) : Effect.void))
          )
          yield* s.start("level1", level1, always)
        })
      ).pipe(Effect.provide(hostLayer), Effect.fork)

      // 6 processes (level1, level2-a, level3-x, level3-y, and two from the actor), 3 pids each.
      const all = yield* procs.changes.pipe(
        Stream.filter((ps) => ps.length === 18),
        Stream.runHead,
        Effect.map(Option.getOrThrow)
      )
      expect(new Set(all.map((p) => p.pid)).size).toBe(18)
      expect(new Set(all.map((p) => p.owner))).toEqual(
        new Set(["level1", "level2-a", "level3-x", "level3-y", "level3-z/1", "level3-z/2"])
      )
      for (const proc of all) expect([proc, procState(proc.pid)]).toEqual([proc, "running"])
      expect(yield* Ref.get(restarts)).toBe(0)

      const exit = yield* Fiber.interrupt(top)
      expect(Exit.isInterrupted(exit)).toBe(true)

      // The interrupt returned after every leader exited and was reaped: no waiting needed.
      for (const p of all.filter((p) => p.role === "child")) {
        expect({ ...p, state: procState(p.pid) }).toEqual({ ...p, state: "gone" })
      }
      // Grandchildren were SIGKILLed with their group; they are gone once init reaps them.
      yield* settled(all.map((p) => p.pid))
      for (const p of all) {
        expect({ ...p, state: procState(p.pid) }).toEqual({ ...p, state: "gone" })
      }
    }))
})
