/**
 * A stage: one named step from an input to a typed output, run as one turn
 * of a Claude Code session per item.
 *
 * The prompt is built from the input; the turn's structured output (the CLI's
 * `--json-schema`, answered through its `StructuredOutput` tool) is decoded
 * by `outputSchema`, and a mismatch is a `StructuredOutputInvalid`, reported
 * as the item's `StageFailed`. Each item runs in a fresh session, or, with
 * `fork`, as a forked worker of one base session per run (`Worker.fork`), so
 * every item's request starts with the base's messages and shares its
 * prompt cache.
 */
import type { TaskManager } from "@skein/kernel"
import type { Session } from "@skein/session"
import type { TranscriptStore } from "@skein/store"
import { Duration, type Schedule, Schema } from "effect"
import type { StageFailed } from "./PipelineError.js"

/** The session options a stage may set over the run's `Launch`. */
export type StageSession = Partial<Pick<
  Session.SessionOptions,
  | "cwd"
  | "model"
  | "allowedTools"
  | "disallowedTools"
  | "permissionMode"
  | "systemPrompt"
  | "appendSystemPrompt"
  | "maxTurns"
  | "agents"
  | "settings"
  | "extraArgs"
>>

/** What a forked stage's base session is told once per run, before any item forks from it. */
export interface ForkFrom {
  /** The base session's one prompt: the shared prefix of every item's conversation. */
  readonly base: string
  /** Forked workers running at once per base; default: the stage's concurrency. */
  readonly concurrency?: number | undefined
}

export interface Stage<In, Out, R = never> {
  readonly name: string
  readonly prompt: (input: In) => string
  readonly outputSchema: Schema.Schema<Out, any>
  /** True: the turn's structured output (`--json-schema`); false: the turn's final text, decoded by `outputSchema`. */
  readonly structured: boolean
  readonly session: StageSession
  /** Retries after a `StageFailed` (a bad output, a timeout, a CLI that died); none by default. */
  readonly retry: Schedule.Schedule<unknown, StageFailed> | undefined
  /** Each attempt's bound; its session is interrupted past it. */
  readonly timeout: Duration.Duration | undefined
  readonly fork: ForkFrom | undefined
  /** A failed item ends the run instead of only itself. */
  readonly failFast: boolean
  /** Only for the type: what running the stage needs in context. */
  readonly _R?: (_: never) => R
}

export type Any = Stage<any, any, any>

/** What a forked stage needs: workers are `local_agent` tasks with sidechain transcripts. */
export type ForkServices = TaskManager.TaskManager | TranscriptStore.TranscriptStore

export interface Options<In, Out> {
  readonly name: string
  readonly prompt: (input: In) => string
  readonly outputSchema: Schema.Schema<Out, any>
  readonly session?: StageSession | undefined
  readonly retry?: Schedule.Schedule<unknown, StageFailed> | undefined
  readonly timeout?: Duration.DurationInput | undefined
  readonly failFast?: boolean | undefined
}

const base = <In, Out>(options: Options<In, Out>, fork: ForkFrom | undefined, structured = true) => ({
  name: options.name,
  prompt: options.prompt,
  outputSchema: options.outputSchema,
  structured,
  session: options.session ?? {},
  retry: options.retry,
  timeout: options.timeout === undefined ? undefined : Duration.decode(options.timeout),
  fork,
  failFast: options.failFast ?? false
})

/** A stage whose items each run in a fresh session. */
export const make = <In, Out>(options: Options<In, Out>): Stage<In, Out> => base(options, undefined)

/**
 * A stage whose output is the turn's final text, no schema sent to the CLI:
 * for prose, or a CLI that knows no `--json-schema`.
 */
export const text = <In>(options: Omit<Options<In, string>, "outputSchema">): Stage<In, string> =>
  base({ ...options, outputSchema: Schema.String }, undefined, false)

/**
 * A stage whose items run as forked workers of one base session per run:
 * the base is started and told `fork.base` on the first item, and each item
 * is a `Worker.fork` of it.
 */
export const forked = <In, Out>(options: Options<In, Out> & { readonly fork: ForkFrom }): Stage<In, Out, ForkServices> =>
  base(options, options.fork)
