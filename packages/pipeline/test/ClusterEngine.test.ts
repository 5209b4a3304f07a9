/**
 * What durable runs rely on in `ClusterWorkflowEngine` over `SingleRunner` +
 * sqlite (`Journal.layerSqlite`), on the installed @effect/cluster and
 * @effect/workflow: an activity interrupted by its caller (a crossed budget,
 * Ctrl-C) is interrupted where it runs and is not delivered again, though a
 * later call of it runs it afresh; a finished activity's end, success or
 * failure, is recorded, and a new engine over the same file answers with it
 * without running it; another attempt number runs it again.
 *
 * Its `ActivityRpc` is annotated uninterruptible on the server, which read
 * alone suggests the opposite: if a version makes the caller's interrupt
 * stop short of the activity, or delivers it again, the first test fails.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Activity from "@effect/workflow/Activity"
import { WorkflowInstance } from "@effect/workflow/WorkflowEngine"
import { Deferred, Effect, Fiber, Layer, Ref, Schedule, Schema } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { Journal, Run } from "../src/index.js"

class Refused extends Schema.TaggedError<Refused>()("Refused", { n: Schema.Number }) {}

const tempFile = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-pipeline-engine-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
).pipe(Effect.map((dir) => Path.join(dir, "journal.db")))

/** Calls an activity of run `runId`, as a pipeline's stage does, under attempt `attempt`. */
const call = <A, E, R>(activity: Effect.Effect<A, E, R>, runId: string, attempt = 1) =>
  activity.pipe(
    Effect.provideService(WorkflowInstance, WorkflowInstance.initial(Run.workflow, runId)),
    Effect.provideService(Activity.CurrentAttempt, attempt)
  )

describe("ClusterWorkflowEngine over SingleRunner + sqlite", () => {
  it.scopedLive("an activity interrupted by its caller is interrupted on the runner and not delivered again; a later call runs it afresh", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const runs = yield* Ref.make(0)
      const interrupted = yield* Ref.make(0)
      const started = yield* Deferred.make<void>()
      const slow = Activity.make({
        name: "slow",
        success: Schema.String,
        interruptRetryPolicy: Schedule.stop,
        execute: Effect.gen(function*() {
          const n = yield* Ref.updateAndGet(runs, (n) => n + 1)
          if (n > 1) return "second"
          yield* Deferred.succeed(started, undefined)
          return yield* Effect.never
        }).pipe(Effect.onInterrupt(() => Ref.update(interrupted, (n) => n + 1)))
      })
      yield* Effect.gen(function*() {
        const fiber = yield* Effect.fork(call(slow, "interrupted-run"))
        yield* Deferred.await(started)
        yield* Fiber.interrupt(fiber)
        // The interrupt returned once the activity's own fiber was interrupted.
        expect(yield* Ref.get(interrupted)).toBe(1)
        // Nothing delivers it again meanwhile (the engine's poll interval is 250 ms).
        yield* Effect.sleep("1500 millis")
        expect(yield* Ref.get(runs)).toBe(1)
        // The same call again, as a resumed run makes it: the activity runs, not the interrupt's record.
        expect(yield* call(slow, "interrupted-run")).toBe("second")
        expect(yield* Ref.get(runs)).toBe(2)
      }).pipe(Effect.provide(Journal.layerSqlite(file)))
    }), 30_000)

  it.scopedLive("ends are recorded: a new engine over the file answers without running; another attempt number runs again", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const runs = yield* Ref.make(0)
      const ok = Activity.make({ name: "ok", success: Schema.Number, execute: Ref.updateAndGet(runs, (n) => n + 1) })
      const refused = Activity.make({
        name: "refused",
        error: Refused,
        execute: Effect.flatMap(Ref.updateAndGet(runs, (n) => n + 1), (n) => new Refused({ n }))
      })
      const both = Effect.all([call(ok, "recorded-run"), Effect.flip(call(refused, "recorded-run"))])
      const engine = (file: string) => Layer.fresh(Journal.layerSqlite(file))

      const [first, firstRefusal] = yield* Effect.provide(both, engine(file))
      expect([first, firstRefusal.n]).toEqual([1, 2])
      // Another process's engine, as after a crash: both ends come from the file.
      const [again, againRefusal] = yield* Effect.provide(both, engine(file))
      expect([again, againRefusal.n]).toEqual([1, 2])
      expect(yield* Ref.get(runs)).toBe(2)
      // Attempt 2 is a new call: it runs.
      const retried = yield* Effect.provide(Effect.flip(call(refused, "recorded-run", 2)), engine(file))
      expect(retried.n).toBe(3)
    }), 30_000)
})
