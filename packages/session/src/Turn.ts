/**
 * A turn: one user message and all the work it causes, up to the
 * authoritative end of work.
 *
 * A `result` is not the end: while background tasks run the CLI reports
 * `result` and even `idle`, then a task notification starts a follow-up with
 * a second `result`. A turn ends at an `idle` with none of its own background
 * tasks live (or at `result`, on a CLI that prints no state events), and waits
 * for its tasks only up to a bound. Work the CLI starts by itself while no
 * turn is live is a turn too, of origin `cli`. The rules are in `TurnTracker`.
 */
import type { CliMessage, Lenient } from "@skein/protocol"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type * as Stream from "effect/Stream"
import { StructuredOutputInvalid, type TurnError } from "./SessionError.js"
import type { EndReason, Origin } from "./TurnTracker.js"

/** Every message and diagnostic the session saw, in order. */
export type SessionEvent = Lenient.Decoded<CliMessage.CliMessage>

export interface TurnUsage {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly cacheReadInputTokens: number
  readonly cacheCreationInputTokens: number
}

export interface TurnSummary {
  /** Every `result` of the turn, follow-ups after task notifications included. */
  readonly results: ReadonlyArray<CliMessage.Result>
  /** The text of the last successful result. */
  readonly text: string | undefined
  readonly usage: TurnUsage
  /** What this turn added to the session's cumulative cost. */
  readonly costUsd: number
  readonly stopReason: string | null
  /** True when `interrupt` ended the turn. */
  readonly interrupted: boolean
  /** True when a result reported an error. */
  readonly isError: boolean
  /** `host` for a turn `send` began; `cli` for one the CLI began by itself (a task's follow-up). */
  readonly origin: Origin
  readonly endReason: EndReason
  /** Background tasks this turn started that were still running when it ended. */
  readonly liveTasks: ReadonlyArray<string>
  /** With the session's `outputSchema`: the last result's structured output, decoded by it. */
  readonly structuredOutput?: Either.Either<unknown, StructuredOutputInvalid> | undefined
}

export interface Turn {
  /** Host turns are numbered from 1 in the order of `send`; CLI turns from 1 in their own order. */
  readonly index: number
  readonly origin: Origin
  /**
   * This turn's events, from its send to its end, without the answers to the
   * host's own control requests (those are on `subscribe`). Fails if the CLI exits first.
   */
  readonly events: Stream.Stream<SessionEvent, TurnError>
  /** Waits for the end of the turn. */
  readonly result: Effect.Effect<TurnSummary, TurnError>
}

export const emptyUsage: TurnUsage = {
  inputTokens: 0,
  outputTokens: 0,
  cacheReadInputTokens: 0,
  cacheCreationInputTokens: 0
}

/** The part of a summary that follows from a turn's results. */
export const summarize = (
  results: ReadonlyArray<CliMessage.Result>,
  options: { readonly costBefore: number; readonly interrupted: boolean }
): Omit<TurnSummary, "origin" | "endReason" | "liveTasks"> => {
  const usage = results.reduce<TurnUsage>((u, r) => ({
    inputTokens: u.inputTokens + r.usage.input_tokens,
    outputTokens: u.outputTokens + r.usage.output_tokens,
    cacheReadInputTokens: u.cacheReadInputTokens + (r.usage.cache_read_input_tokens ?? 0),
    cacheCreationInputTokens: u.cacheCreationInputTokens + (r.usage.cache_creation_input_tokens ?? 0)
  }), emptyUsage)
  const last = results.at(-1)
  const lastSuccess = results.findLast((r): r is CliMessage.ResultSuccess => r.subtype === "success")
  return {
    results,
    text: lastSuccess?.result,
    usage,
    costUsd: last === undefined ? 0 : Math.max(0, last.total_cost_usd - options.costBefore),
    stopReason: last?.stop_reason ?? null,
    interrupted: options.interrupted,
    isError: results.some((r) => r.is_error)
  }
}

/**
 * Decodes the structured output of a turn's results with the session's
 * `outputSchema`: the last successful result's `structured_output`.
 */
export const decodeStructuredOutput = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknownEither(schema, { errors: "all" })
  return (results: ReadonlyArray<CliMessage.Result>): Either.Either<A, StructuredOutputInvalid> => {
    const last = results.at(-1)
    const output = last?.subtype === "success" ? last.structured_output : undefined
    if (output === undefined) {
      return Either.left(new StructuredOutputInvalid({
        issue: `the turn ended without structured output (${last === undefined ? "no result" : last.subtype})`,
        output: null
      }))
    }
    return Either.mapLeft(decode(output), (e) => new StructuredOutputInvalid({ issue: ParseResult.TreeFormatter.formatErrorSync(e), output }))
  }
}

/**
 * A summary's structured output as the schema's type: the decoded value
 * (checked against `schema`, which should be the session's `outputSchema`),
 * or `StructuredOutputInvalid`. Fails too when the session had no `outputSchema`.
 */
export const structuredOutput = <A, I>(schema: Schema.Schema<A, I>) => (summary: TurnSummary): Effect.Effect<A, StructuredOutputInvalid> => {
  const decoded = summary.structuredOutput
  if (decoded === undefined) {
    return Effect.fail(new StructuredOutputInvalid({ issue: "the session has no outputSchema", output: null }))
  }
  return Effect.flatMap(decoded, (value) =>
    Schema.validate(schema)(value).pipe(
      Effect.mapError((e) => new StructuredOutputInvalid({ issue: ParseResult.TreeFormatter.formatErrorSync(e), output: value }))
    ))
}
