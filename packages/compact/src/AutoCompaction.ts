/**
 * Automatic compaction: after each turn, when the context the last request
 * carried crosses a share of the model's window, run the passes (pass 1,
 * then pass 2) behind a circuit breaker.
 *
 * The context size is read from the usage of the turn's last assistant
 * message (input, cache reads and writes, output): what the next request
 * will at least carry. Manual runs (`compact`) share the breaker: they run
 * even while it is open, and a success closes it.
 *
 * @since 0.0.0
 */
import type { Anthropic } from "@skein/protocol"
import { Effect, Queue, Ref, Stream, type Subscribable } from "effect"
import * as CircuitBreaker from "./CircuitBreaker.js"
import type * as CompactableSession from "./CompactableSession.js"
import * as Compaction from "./Compaction.js"

/**
 * @since 0.0.0
 */
export interface AutoOptions extends Omit<Compaction.RunOptions, "trigger"> {
  /** The model's context window, in tokens. Default 200,000. */
  readonly contextWindow?: number | undefined
  /** Compact once the context reaches this share of the window. Default 0.8. */
  readonly threshold?: number | undefined
  /** Consecutive failures that open the breaker. Default 3. */
  readonly maxFailures?: number | undefined
}

/**
 * @since 0.0.0
 */
export interface AutoCompaction {
  /** The breaker: consecutive failures, and whether automatic runs are stopped. */
  readonly breaker: Subscribable.Subscribable<CircuitBreaker.State>
  /** A manual run; it goes through an open breaker, and a success closes it. */
  readonly compact: (options?: Compaction.RunOptions) => Effect.Effect<
    Compaction.Outcome,
    Compaction.RunError | CircuitBreaker.BreakerOpen,
    Compaction.RunContext
  >
}

/** Tokens the request that produced `usage` carried, plus its answer. */
export const contextTokens = (usage: Anthropic.Usage): number =>
  usage.input_tokens + (usage.cache_read_input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0) + usage.output_tokens

const describe = (outcome: Compaction.Outcome) => outcome._tag === "Declined" ? `declined: ${outcome.reason._tag}` : "compacted"

/**
 * Watches `session` in the current scope.
 *
 * @since 0.0.0
 */
export const start = Effect.fn("AutoCompaction.start")(function*(
  session: CompactableSession.CompactableSession,
  options: AutoOptions = {}
) {
  const breaker = yield* CircuitBreaker.make({ threshold: options.maxFailures })
  // The session's state says when automatic compaction has stopped.
  yield* breaker.state.changes.pipe(Stream.runForEach((s) => session.setBreakerOpen(s.open)), Effect.forkScoped)
  const limit = (options.contextWindow ?? 200_000) * (options.threshold ?? 0.8)
  const context = yield* Ref.make(0)
  const events = yield* session.subscribe
  const guarded = (automatic: boolean, run: Compaction.RunOptions) =>
    breaker.guard(Compaction.run(session, run), { automatic, succeeded: (o) => o._tag === "Compacted", describe })

  const afterTurn = Effect.gen(function*() {
    if ((yield* Ref.get(context)) < limit) return
    const outcome = yield* guarded(true, { ...options, trigger: "auto" }).pipe(
      Effect.tapError((error) => Effect.logWarning("AutoCompaction: no compaction").pipe(Effect.annotateLogs({ error: error._tag }))),
      Effect.option
    )
    if (outcome._tag === "Some" && outcome.value._tag === "Compacted") yield* Ref.set(context, outcome.value.postTokens)
  })

  yield* Queue.take(events).pipe(
    Effect.flatMap((event) => {
      if (event._tag !== "Message") return Effect.void
      const message = event.message
      if (message.type === "assistant" && message.parent_tool_use_id === null) {
        return Ref.set(context, contextTokens(message.message.usage))
      }
      return message.type === "result" ? afterTurn : Effect.void
    }),
    Effect.forever,
    Effect.forkScoped
  )

  const auto: AutoCompaction = {
    breaker: breaker.state,
    compact: (run) => guarded(false, { ...run, trigger: "manual" })
  }
  return auto
})
