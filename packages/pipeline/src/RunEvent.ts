/**
 * What a run reports as it goes: a `Stream` of events (NDJSON for
 * `skein pipeline run --json`) and a `Summary` a run keeps current (its `summary`).
 * Both are schemas, so they cross a process boundary as JSON unchanged.
 */
import * as Schema from "effect/Schema"
import { Spent } from "./PipelineError.js"

const item = {
  stage: Schema.String,
  /** The item's key: a hash of its input, with a counter for repeats. */
  key: Schema.String,
  /** Its position in the input, from 0. */
  index: Schema.Number
}

export class RunStarted extends Schema.TaggedClass<RunStarted>()("RunStarted", {
  runId: Schema.String,
  /** How many items, when the input is a list; null for a stream. */
  total: Schema.NullOr(Schema.Number),
  budget: Schema.Struct({ usd: Schema.NullOr(Schema.Number), tokens: Schema.NullOr(Schema.Number) })
}) {}

export class ItemStarted extends Schema.TaggedClass<ItemStarted>()("ItemStarted", { ...item, attempt: Schema.Number }) {}

/**
 * An item tried again: after a failed attempt (`attempt` > 1), or, in a
 * durable run started again, after the failure an earlier run recorded
 * (`attempt` 1, the reason "failed in an earlier run: …").
 */
export class ItemRetried extends Schema.TaggedClass<ItemRetried>()("ItemRetried", {
  ...item,
  attempt: Schema.Number,
  reason: Schema.String
}) {}

export class ItemDone extends Schema.TaggedClass<ItemDone>()("ItemDone", {
  ...item,
  /** True when a durable run had recorded this result already: nothing was sent to the model. */
  recorded: Schema.Boolean
}) {}

export class ItemFailed extends Schema.TaggedClass<ItemFailed>()("ItemFailed", { ...item, reason: Schema.String }) {}

/** An item that did not start: the budget left could not cover the mean cost of a turn. */
export class ItemSkipped extends Schema.TaggedClass<ItemSkipped>()("ItemSkipped", item) {}

/** A turn's cost was counted. */
export class CostCounted extends Schema.TaggedClass<CostCounted>()("CostCounted", {
  stage: Schema.String,
  key: Schema.String,
  usd: Schema.Number,
  tokens: Schema.Number,
  spent: Spent
}) {}

export class RunEnded extends Schema.TaggedClass<RunEnded>()("RunEnded", {
  runId: Schema.String,
  outcome: Schema.Literal("done", "failed", "budget", "interrupted"),
  spent: Spent,
  done: Schema.Number,
  failed: Schema.Number,
  pending: Schema.Number
}) {}

export const RunEvent = Schema.Union(RunStarted, ItemStarted, ItemRetried, ItemDone, ItemFailed, ItemSkipped, CostCounted, RunEnded)
export type RunEvent = typeof RunEvent.Type

/** Where a run stands. */
export const Summary = Schema.Struct({
  runId: Schema.String,
  /** Input items, when the input is a list; null for a stream. */
  total: Schema.NullOr(Schema.Number),
  /** Input items read so far. */
  read: Schema.Number,
  /** Input items that left the pipeline: reached its end, failed, were filtered out or skipped. */
  settled: Schema.Number,
  /** (item, stage) results: each stage an item went through counts once. */
  done: Schema.Number,
  /** (item, stage) sessions running now. */
  running: Schema.Number,
  failed: Schema.Number,
  /** Items not started because the budget left could not cover the mean turn. */
  skipped: Schema.Number,
  /** (item, stage) results a durable run had recorded already: nothing was sent for them. */
  recorded: Schema.Number,
  spent: Spent,
  budget: Schema.Struct({ usd: Schema.NullOr(Schema.Number), tokens: Schema.NullOr(Schema.Number) }),
  startedAtMillis: Schema.Number
})
export type Summary = typeof Summary.Type

/** One event as a line of NDJSON. */
export const encodeLine = (event: RunEvent): string => `${JSON.stringify(Schema.encodeSync(RunEvent)(event))}\n`
