/**
 * What can end an item or a run, one error per failure a caller can act on.
 */
import * as Schema from "effect/Schema"

export { StructuredOutputInvalid } from "@skein/session/SessionError"

/** Money and tokens counted so far, from each turn's `result`. */
export const Spent = Schema.Struct({
  usd: Schema.Number,
  tokens: Schema.Number
})
export type Spent = typeof Spent.Type

/**
 * The run's budget is spent: a turn's cost crossed a cap (`crossed`: every
 * session in flight was interrupted), or what was left could not cover the
 * mean cost of a turn so far (`exhausted`: the items not started are
 * pending). `done` counts (item, stage) results; `pending` counts input
 * items that did not come out of the run, the one whose turn crossed the cap
 * included (its result is recorded all the same, so a resumed durable run
 * does not pay for it again).
 */
export class BudgetExceeded extends Schema.TaggedError<BudgetExceeded>()("BudgetExceeded", {
  spent: Spent,
  done: Schema.Number,
  pending: Schema.Number,
  reason: Schema.Literal("crossed", "exhausted")
}) {
  override get message(): string {
    return `the budget is spent ($${this.spent.usd.toFixed(4)}, ${this.spent.tokens} tokens): ${this.done} items done, ${this.pending} pending`
  }
}

/** A cap of 0 or below, or not a number: refused before anything runs. */
export class BudgetInvalid extends Schema.TaggedError<BudgetInvalid>()("BudgetInvalid", {
  field: Schema.Literal("usd", "tokens"),
  value: Schema.Number
}) {
  override get message(): string {
    return `budget ${this.field} must be a number above 0, not ${this.value}`
  }
}

/**
 * An item failed a stage after its retries: the CLI exited, the stage timed
 * out, or its structured output did not match the stage's schema. It ends
 * that item, and the run only when the stage is `failFast`.
 */
export class StageFailed extends Schema.TaggedError<StageFailed>()("StageFailed", {
  stage: Schema.String,
  key: Schema.String,
  cause: Schema.Literal("StructuredOutputInvalid", "Timeout", "CliFailed", "TurnFailed"),
  detail: Schema.String
}) {
  override get message(): string {
    return `stage ${this.stage} failed on item ${this.key} (${this.cause}): ${this.detail}`
  }
}
