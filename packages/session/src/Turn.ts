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
import * as Stream from "effect/Stream"
import { StructuredOutputInvalid, type TurnError, TurnFailed } from "./SessionError.js"
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
  /** The text of the last successful result (never the CLI's own error message). */
  readonly text: string | undefined
  readonly usage: TurnUsage
  /** What this turn added to the session's cumulative cost. */
  readonly costUsd: number
  readonly stopReason: string | null
  /** True when `interrupt` ended the turn. */
  readonly interrupted: boolean
  /** True when a result reported an error, or the turn's only answer was the CLI's error message. */
  readonly isError: boolean
  /**
   * Why the turn failed, in the CLI's words (`Not logged in · Please run /login`),
   * whenever `isError` is true. `Turn.succeeded` fails with it.
   */
  readonly failure?: TurnFailed | undefined
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

/** The CLI's synthetic error message of a turn (it printed no model text). */
export interface SyntheticError {
  /** The CLI's code for it, e.g. `authentication_failed`. */
  readonly reason: string
  readonly text: string
}

/**
 * The CLI's own error message, if this assistant message is one: the CLI
 * writes it in place of the model's answer when it could not get one (no
 * login, an API error it gave up on), marked with an `error` code.
 */
export const syntheticError = (message: CliMessage.Assistant): SyntheticError | undefined => {
  if (message.error === undefined || message.error === null) return undefined
  const text = textOf(message)
  return { reason: typeof message.error === "string" ? message.error : "api_error", text: text.length > 0 ? text : "the model could not be reached" }
}

const textOf = (message: CliMessage.Assistant): string =>
  message.message.content.flatMap((block) => block.type === "text" && "text" in block && typeof block.text === "string" ? [block.text] : []).join("\n")

/**
 * The model's text of a turn's events, one string per assistant message, without
 * the CLI's own error messages (those are the turn's `failure`).
 */
export const texts = <E, R>(events: Stream.Stream<SessionEvent, E, R>): Stream.Stream<string, E, R> =>
  Stream.flatMap(events, (event) => {
    if (event._tag !== "Message" || event.message.type !== "assistant" || syntheticError(event.message) !== undefined) return Stream.empty
    const text = textOf(event.message)
    return text.length > 0 ? Stream.succeed(text) : Stream.empty
  })

const oneLine = (text: string) => text.split("\n").map((line) => line.trim()).filter((line) => line.length > 0).join(" ")

/** Why a turn failed: its last erroring result, else the CLI's synthetic error when the model wrote no text. */
const failureOf = (results: ReadonlyArray<CliMessage.Result>, synthetic: SyntheticError | undefined): TurnFailed | undefined => {
  const failed = results.findLast((r) => r.is_error)
  if (failed === undefined) return synthetic === undefined ? undefined : new TurnFailed({ reason: synthetic.reason, text: oneLine(synthetic.text) })
  const said = failed.subtype === "success" ? failed.result : (failed.errors ?? []).join("; ")
  const text = said.trim().length > 0 ? said : synthetic?.text ?? `the turn ended with ${failed.subtype}`
  const reason = synthetic?.reason ?? (failed.subtype === "success" ? failed.terminal_reason ?? "error" : failed.subtype)
  return new TurnFailed({ reason, text: oneLine(text) })
}

/**
 * The turn's summary, or its `failure` as an error: for a caller that wants
 * the model's answer and nothing else.
 */
export const succeeded = (summary: TurnSummary): Effect.Effect<TurnSummary, TurnFailed> =>
  summary.failure !== undefined
    ? Effect.fail(summary.failure)
    : summary.isError
    ? Effect.fail(new TurnFailed({ reason: summary.results.at(-1)?.subtype ?? "error", text: "the turn failed" }))
    : Effect.succeed(summary)

/** The part of a summary that follows from a turn's results. */
export const summarize = (
  results: ReadonlyArray<CliMessage.Result>,
  options: {
    readonly costBefore: number
    readonly interrupted: boolean
    /** The CLI's synthetic error message, when the turn's main agent wrote no text of the model's. */
    readonly synthetic?: SyntheticError | undefined
  }
): Omit<TurnSummary, "origin" | "endReason" | "liveTasks"> => {
  const usage = results.reduce<TurnUsage>((u, r) => ({
    inputTokens: u.inputTokens + r.usage.input_tokens,
    outputTokens: u.outputTokens + r.usage.output_tokens,
    cacheReadInputTokens: u.cacheReadInputTokens + (r.usage.cache_read_input_tokens ?? 0),
    cacheCreationInputTokens: u.cacheCreationInputTokens + (r.usage.cache_creation_input_tokens ?? 0)
  }), emptyUsage)
  const last = results.at(-1)
  const lastSuccess = results.findLast((r): r is CliMessage.ResultSuccess => r.subtype === "success" && !r.is_error)
  const failure = failureOf(results, options.synthetic)
  return {
    results,
    text: lastSuccess?.result,
    usage,
    costUsd: last === undefined ? 0 : Math.max(0, last.total_cost_usd - options.costBefore),
    stopReason: last?.stop_reason ?? null,
    interrupted: options.interrupted,
    isError: failure !== undefined,
    failure
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
