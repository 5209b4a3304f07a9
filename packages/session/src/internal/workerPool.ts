/**
 * The pool's bookkeeping: the workers forked so far, killing them all at
 * once, and adding up their costs.
 */
import type { TaskManager } from "@skein/kernel"
import { Deferred, Effect, Option } from "effect"
import type * as Session from "../Session.js"
import type * as SessionState from "../SessionState.js"
import { emptyUsage, type TurnUsage } from "../Turn.js"
import type { Costs, Worker, WorkerCost } from "../Worker.js"
import type { WorkerError } from "./workerError.js"

export interface Entry {
  readonly worker: Worker
  readonly started: Deferred.Deferred<Session.Session, WorkerError>
}

/** Kills every worker concurrently; each kill is bounded (see `workerTeardown.stop`), so this is too. */
export const killAll = (entries: ReadonlyMap<string, Entry>): Effect.Effect<void> =>
  Effect.suspend(() =>
    Effect.forEach(Array.from(entries.values()), (entry) => entry.worker.kill, { concurrency: "unbounded", discard: true })
  )

const usageOf = (counters: SessionState.Counters): TurnUsage => ({
  inputTokens: counters.inputTokens,
  outputTokens: counters.outputTokens,
  cacheReadInputTokens: counters.cacheReadInputTokens,
  cacheCreationInputTokens: counters.cacheCreationInputTokens
})

/** The parent's cost and each worker's, as each process counted its own. */
export const costs = (
  parent: Session.Session,
  entries: ReadonlyMap<string, Entry>,
  tasks: TaskManager.TaskManager["Type"]
): Effect.Effect<Costs> =>
  Effect.gen(function*() {
    const parentState = yield* parent.state.get
    const workers: Array<WorkerCost> = []
    for (const entry of entries.values()) {
      const status = (yield* Effect.orDie(tasks.get(entry.worker.taskId))).status
      const session = yield* Deferred.poll(entry.started)
      const state = Option.isSome(session)
        ? yield* Effect.option(Effect.flatMap(session.value, (s) => s.state.get))
        : Option.none()
      const counters = Option.map(state, (s) => s.counters)
      workers.push({
        taskId: entry.worker.taskId,
        label: entry.worker.label,
        status,
        costUsd: Option.match(counters, { onNone: () => 0, onSome: (c) => c.costUsd }),
        usage: Option.match(counters, { onNone: () => emptyUsage, onSome: usageOf })
      })
    }
    const workersUsd = workers.reduce((sum, w) => sum + w.costUsd, 0)
    const parentUsd = parentState.counters.costUsd
    return { parentUsd, workersUsd, totalUsd: parentUsd + workersUsd, workers }
  })
