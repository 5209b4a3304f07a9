/**
 * What every step of one run shares: its id, launch options, budget, event
 * hub and summary, the workflow instance its activities record under, and
 * the base sessions of forked stages.
 */
import type { WorkflowEngine, WorkflowInstance } from "@effect/workflow/WorkflowEngine"
import type { Session, Worker } from "@skein/session"
import { Context, Effect, Equal, type FiberSet, Hash, type Option, type PubSub, type RcMap, type Scope } from "effect"
import type * as Budget from "../Budget.js"
import type { BudgetExceeded, StageFailed } from "../PipelineError.js"
import type { RunEvent, Summary } from "../RunEvent.js"
import type { SummaryCell } from "./summaryCell.js"

/**
 * The key of a forked stage's base session: its stage's name. It carries the
 * effect that starts the base (with its caller's context), which the first
 * lookup runs; equality looks at the name only.
 */
export class BaseKey implements Equal.Equal {
  constructor(
    readonly stage: string,
    readonly start: Effect.Effect<Worker.Workers, StageFailed, Scope.Scope>
  ) {}
  [Equal.symbol](that: Equal.Equal): boolean {
    return that instanceof BaseKey && that.stage === this.stage
  }
  [Hash.symbol](): number {
    return Hash.string(this.stage)
  }
}

export interface RunContext {
  readonly runId: string
  readonly launch: Session.SessionOptions
  readonly budget: Budget.Budget
  readonly events: PubSub.PubSub<RunEvent>
  readonly summary: SummaryCell<Summary>
  /** The durable engine in context, if any. */
  readonly engine: Option.Option<WorkflowEngine["Type"]>
  readonly instance: WorkflowInstance["Type"]
  readonly bases: RcMap.RcMap<BaseKey, Worker.Workers, StageFailed>
  /** Sessions of finished items, closing off the items' path; the run ends once they are closed. */
  readonly closing: FiberSet.FiberSet
}

export class Run extends Context.Tag("@skein/pipeline/internal/Run")<Run, RunContext>() {}

export const emit = (event: RunEvent) => Effect.flatMap(Run, (run) => run.events.publish(event))

export const update = (f: (summary: Summary) => Summary) => Effect.flatMap(Run, (run) => run.summary.update(f))

/** Items not finished: not yet settled, or skipped for the budget (a resumed run would do them). */
export const pendingOf = (s: Summary): number => Math.max(0, (s.total ?? s.read) - s.settled + s.skipped)

/** The fields of `BudgetExceeded` besides what was spent. */
export const progressOf = (run: RunContext) =>
  Effect.map(run.summary.get, (s) => ({
    done: s.done,
    pending: pendingOf(s)
  }))

export type Crossed = BudgetExceeded
