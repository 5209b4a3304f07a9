/**
 * The three memory jobs of one session, wired to its turns: after each
 * turn, session memory counts it (and runs when due), extraction is
 * requested, and the dream's cheap gates are evaluated. Each job can be
 * turned off in its config and triggered by hand (`extraction.extract`,
 * `dream.run`, `sessionMemory.update`).
 *
 * @since 0.0.0
 */
import { Effect, Option, type Scope, Stream } from "effect"
import type { Session, Worker } from "@skein/session"
import * as Dream from "./Dream.js"
import * as Extraction from "./Extraction.js"
import * as MemoryEvents from "./MemoryEvents.js"
import * as SessionMemory from "./SessionMemory.js"

/**
 * @since 0.0.0
 */
export interface Options {
  readonly workers: Worker.Workers
  readonly launch: Session.SessionOptions
  readonly extraction?: Partial<Extraction.Config> | undefined
  readonly dream?: Partial<Dream.Config> | undefined
  readonly sessionMemory?: Partial<SessionMemory.Config> | undefined
}

/**
 * @since 0.0.0
 */
export interface Memory {
  readonly extraction: Extraction.Extraction
  readonly dream: Dream.Dream
  readonly sessionMemory: SessionMemory.SessionMemory
  /** Runs the jobs after each of the session's turns, for as long as the current scope. */
  readonly afterEachTurn: Effect.Effect<void, never, Scope.Scope>
}

/**
 * @since 0.0.0
 */
export const make = Effect.fn("Memory.make")(function*(options: Options) {
  const extraction = yield* Extraction.make({ workers: options.workers, launch: options.launch, config: options.extraction })
  const dream = yield* Dream.make({ workers: options.workers, launch: options.launch, config: options.dream })
  const sessionMemory = yield* SessionMemory.make({
    workers: options.workers,
    launch: options.launch,
    config: options.sessionMemory
  })
  const parent = options.workers.parent
  const dreamAfterTurn = dream.afterTurn.pipe(
    Effect.catchAll((error) =>
      Effect.flatMap(Effect.option(parent.sessionId), (id) =>
        MemoryEvents.emit({ _tag: "Failed", job: "dream", sessionId: Option.getOrElse(id, () => ""), reason: error.message })))
  )
  const memory: Memory = {
    extraction,
    dream,
    sessionMemory,
    afterEachTurn: Effect.gen(function*() {
      const turns = yield* parent.turns
      yield* Stream.fromQueue(turns).pipe(
        Stream.runForEach((turn) =>
          Effect.flatMap(Effect.option(turn.result), (summary) =>
            Option.isNone(summary) ? Effect.void : Effect.all([
              sessionMemory.afterTurn(summary.value.usage),
              extraction.request,
              dreamAfterTurn
            ], { discard: true }))
        ),
        Effect.forkScoped
      )
    })
  }
  return memory
})
