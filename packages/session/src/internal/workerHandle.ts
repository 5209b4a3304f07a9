/**
 * A worker as its caller holds it: its ids and files, and effects over its
 * task. Every wait on the worker's session or outcome also ends when the
 * task does, so a worker killed before its work ran never leaves anyone
 * waiting.
 */
import type { TaskManager } from "@skein/kernel"
import { Deferred, type Duration, Effect, Option } from "effect"
import type * as Session from "../Session.js"
import type { Worker, WorkerResult } from "../Worker.js"
import type { ForkPlan } from "./forkLaunch.js"
import { type WorkerError, WorkerKilled } from "./workerError.js"
import * as Teardown from "./workerTeardown.js"

export interface HandleOptions {
  readonly plan: ForkPlan
  readonly taskId: Worker["taskId"]
  readonly tasks: TaskManager.TaskManager["Type"]
  readonly parent: Session.Session
  readonly started: Deferred.Deferred<Session.Session, WorkerError>
  readonly outcome: Deferred.Deferred<WorkerResult, WorkerError>
  readonly hold: Teardown.Hold
  /** How long a kill may take before the pool SIGKILLs the worker's process. */
  readonly stopBound: Duration.Duration
}

export const make = (options: HandleOptions): Worker => {
  const { parent, plan, taskId, tasks } = options
  const ended = tasks.await(taskId).pipe(Effect.orDie)
  /** The deferred's outcome, or the task's end if its work never ran. */
  const orEnded = <A>(deferred: Deferred.Deferred<A, WorkerError>) =>
    Effect.raceFirst(
      Deferred.await(deferred),
      ended.pipe(
        Effect.zipRight(Deferred.poll(deferred)),
        Effect.flatMap(Option.match({
          onSome: (value) => value,
          onNone: () => Effect.flatMap(ended, (r) => Effect.fail(new WorkerKilled({ taskId, status: r.status })))
        }))
      )
    )
  const kill = Teardown.stop({
    taskId,
    kill: tasks.kill(taskId).pipe(Effect.catchAll(() => ended)),
    current: tasks.get(taskId).pipe(Effect.orDie),
    hold: options.hold,
    bound: options.stopBound
  })
  return {
    taskId,
    label: plan.label,
    agentId: plan.agentId,
    mode: plan.mode,
    sessionId: plan.sessionId,
    parentSessionId: plan.parentSessionId,
    transcriptPath: plan.transcriptPath,
    sidechainPath: plan.sidechain.transcript,
    metaPath: plan.sidechain.meta,
    session: orEnded(options.started),
    result: ended.pipe(Effect.zipRight(orEnded(options.outcome))),
    record: ended,
    kill,
    interrupt: Effect.gen(function*() {
      const session = yield* orEnded(options.started)
      yield* session.interrupt
      if (plan.mode === "interactive") yield* parent.interrupt
    })
  }
}
