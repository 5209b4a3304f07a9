/**
 * A pipeline: stages composed over a `Stream` of inputs.
 *
 *   const review = Pipeline.from<File>().pipe(
 *     Pipeline.through(verdict, { concurrency: 8 }),
 *     Pipeline.filter((v) => Effect.succeed(v.risk === "high")),
 *     Pipeline.gather(summary)
 *   )
 *   const result = yield* Run.collect(review, files, { budget: { usd: 5 } })
 *
 * `through` runs a stage over every item, `concurrency` at once; an item
 * moves on to the next step as soon as it is done, and the run's outputs
 * (and a gather's inputs) come back in input order; `map` and `filter` take plain Effects
 * between stages; `all` runs several stages on each item at once and gathers
 * their outputs in a record; `gather` runs one stage over every output so far.
 * An item that fails a stage (after its retries) drops out of the run, which
 * goes on; a `failFast` stage's failure ends the run.
 */
import { Context, Effect, Option, type Pipeable, Record, Stream } from "effect"
import { dual } from "effect/Function"
import { pipeArguments } from "effect/Pipeable"
import type { BudgetExceeded, StageFailed } from "./PipelineError.js"
import type * as Stage from "./Stage.js"
import { hashOf, type Item } from "./internal/item.js"
import { mapUnordered } from "./internal/mapUnordered.js"
import { type Run, update } from "./internal/runContext.js"
import * as StageRun from "./internal/stageRun.js"

export interface Pipeline<In, Out, E = never, R = never> extends Pipeable.Pipeable {
  readonly apply: <E0, R0>(items: Stream.Stream<Item<In>, E0, R0>) => Stream.Stream<Item<Out>, E0 | E, R0 | R | Run>
}

/** What a stage's failure and the budget add to a pipeline's errors. */
export type StageError = StageFailed | BudgetExceeded

const make = <In, Out, E, R>(apply: Pipeline<In, Out, E, R>["apply"]): Pipeline<In, Out, E, R> => ({
  apply,
  pipe() {
    return pipeArguments(this, arguments)
  }
})

/** The empty pipeline over inputs of type `In`. */
export const from = <In>(): Pipeline<In, In> => make((items) => items)

export interface ThroughOptions {
  /** Items in this stage at once; default: the `Concurrency` in context (1 unless set). */
  readonly concurrency?: number | undefined
}

/**
 * How many items a stage without a `concurrency` of its own runs at once:
 * `skein pipeline run --concurrency N` sets it for the whole pipeline.
 */
export class Concurrency extends Context.Reference<Concurrency>()("@skein/pipeline/Concurrency", {
  defaultValue: () => 1
}) {}

const concurrencyOf = (options: ThroughOptions | undefined) =>
  options?.concurrency === undefined ? Effect.map(Concurrency, (n) => Math.max(1, n)) : Effect.succeed(Math.max(1, options.concurrency))

/** An item that drops out (failed, skipped, filtered) leaves the run's count of pending items. */
const settle = (item: Item<unknown>) => update((s) => ({ ...s, settled: s.settled + item.sources }))

const dropOnNone = <A>(item: Item<unknown>, output: Option.Option<A>) =>
  Option.match(output, {
    onNone: () => Effect.as(settle(item), Option.none<A>()),
    onSome: (value) => Effect.succeed(Option.some(value))
  })

/** Runs a stage on every item, `concurrency` at once. */
export const through: {
  <Out, Out2, SR>(stage: Stage.Stage<Out, Out2, SR>, options?: ThroughOptions): <In, E, R>(self: Pipeline<In, Out, E, R>) => Pipeline<In, Out2, E | StageError, R | SR | StageRun.Requirements>
  <In, Out, E, R, Out2, SR>(self: Pipeline<In, Out, E, R>, stage: Stage.Stage<Out, Out2, SR>, options?: ThroughOptions): Pipeline<In, Out2, E | StageError, R | SR | StageRun.Requirements>
} = dual(
  (args) => typeof args[0] === "object" && args[0] !== null && "apply" in args[0],
  <In, Out, E, R, Out2, SR>(self: Pipeline<In, Out, E, R>, stage: Stage.Stage<Out, Out2, SR>, options?: ThroughOptions) => {
    return make<In, Out2, E | StageError, R | SR | StageRun.Requirements>((items) =>
      Stream.unwrap(Effect.map(concurrencyOf(options), (concurrency) =>
      mapUnordered(
        self.apply(items),
        (item) =>
          StageRun.run(stage, item, concurrency).pipe(
            Effect.flatMap((output) => dropOnNone(item, output)),
            Effect.map(Option.map((value): Item<Out2> => ({ ...item, value })))
          ),
        // Items move on as they complete; the run puts its outputs back in input order.
        concurrency
      ).pipe(Stream.filterMap((output) => output))))
    )
  }
)

/** Maps each item with a plain Effect; its failure ends the run. */
export const map: {
  <Out, Out2, E2, R2>(f: (value: Out) => Effect.Effect<Out2, E2, R2>): <In, E, R>(self: Pipeline<In, Out, E, R>) => Pipeline<In, Out2, E | E2, R | R2>
  <In, Out, E, R, Out2, E2, R2>(self: Pipeline<In, Out, E, R>, f: (value: Out) => Effect.Effect<Out2, E2, R2>): Pipeline<In, Out2, E | E2, R | R2>
} = dual(2, <In, Out, E, R, Out2, E2, R2>(self: Pipeline<In, Out, E, R>, f: (value: Out) => Effect.Effect<Out2, E2, R2>) =>
  make<In, Out2, E | E2, R | R2>((items) =>
    self.apply(items).pipe(Stream.mapEffect((item) => Effect.map(f(item.value), (value): Item<Out2> => ({ ...item, value }))))
  ))

/** Keeps the items `f` accepts. */
export const filter: {
  <Out, E2, R2>(f: (value: Out) => Effect.Effect<boolean, E2, R2>): <In, E, R>(self: Pipeline<In, Out, E, R>) => Pipeline<In, Out, E | E2, R | R2>
  <In, Out, E, R, E2, R2>(self: Pipeline<In, Out, E, R>, f: (value: Out) => Effect.Effect<boolean, E2, R2>): Pipeline<In, Out, E | E2, R | R2>
} = dual(2, <In, Out, E, R, E2, R2>(self: Pipeline<In, Out, E, R>, f: (value: Out) => Effect.Effect<boolean, E2, R2>) =>
  make<In, Out, E | E2, R | R2>((items) =>
    self.apply(items).pipe(
      Stream.filterEffect((item) => Effect.tap(f(item.value), (keep) => keep ? Effect.void : settle(item)))
    )
  ))

type Outputs<S extends Record<string, Stage.Any>> = { readonly [K in keyof S]: S[K] extends Stage.Stage<any, infer O, any> ? O : never }
type StagesR<S extends Record<string, Stage.Any>> = S[keyof S] extends Stage.Stage<any, any, infer R> ? R : never

/**
 * Fan-out and gather: each item goes through every stage of the record at
 * once, and comes out as the record of their outputs. An item that fails any
 * of them drops out.
 */
export const all: {
  <Out, S extends Record<string, Stage.Stage<Out, any, any>>>(stages: S, options?: ThroughOptions): <In, E, R>(self: Pipeline<In, Out, E, R>) => Pipeline<In, Outputs<S>, E | StageError, R | StagesR<S> | StageRun.Requirements>
  <In, Out, E, R, S extends Record<string, Stage.Stage<Out, any, any>>>(self: Pipeline<In, Out, E, R>, stages: S, options?: ThroughOptions): Pipeline<In, Outputs<S>, E | StageError, R | StagesR<S> | StageRun.Requirements>
} = dual(
  (args) => typeof args[0] === "object" && args[0] !== null && "apply" in args[0],
  <In, Out, E, R, S extends Record<string, Stage.Stage<Out, any, any>>>(self: Pipeline<In, Out, E, R>, stages: S, options?: ThroughOptions) => {
    const each = (concurrency: number) => (item: Item<Out>) =>
      Effect.all(Record.map(stages, (stage) => StageRun.run(stage, item, concurrency)), { concurrency: "unbounded" }).pipe(
        Effect.map((outputs) => Option.all(outputs)),
        Effect.flatMap((output) => dropOnNone(item, output)),
        Effect.map(Option.map((value) => ({ ...item, value: value as Outputs<S> })))
      )
    return make<In, Outputs<S>, E | StageError, R | StagesR<S> | StageRun.Requirements>((items) =>
      Stream.unwrap(Effect.map(concurrencyOf(options), (concurrency) =>
        mapUnordered(self.apply(items), each(concurrency), concurrency).pipe(Stream.filterMap((output) => output))))
    )
  }
)

/** What `gather` emits: every output that went in, in order, and the stage's output over them. */
export interface Gathered<A, B> {
  readonly items: ReadonlyArray<A>
  readonly output: B
}

/**
 * Gathers every output so far, in order, into one input of `stage`: a
 * summary over all verdicts, say. It emits one `Gathered`, the outputs and
 * the stage's answer. Its key is a hash of the gathered keys, so a durable
 * run records it like any other item.
 */
export const gather: {
  <Out, Out2, SR>(stage: Stage.Stage<ReadonlyArray<Out>, Out2, SR>): <In, E, R>(self: Pipeline<In, Out, E, R>) => Pipeline<In, Gathered<Out, Out2>, E | StageError, R | SR | StageRun.Requirements>
  <In, Out, E, R, Out2, SR>(self: Pipeline<In, Out, E, R>, stage: Stage.Stage<ReadonlyArray<Out>, Out2, SR>): Pipeline<In, Gathered<Out, Out2>, E | StageError, R | SR | StageRun.Requirements>
} = dual(2, <In, Out, E, R, Out2, SR>(self: Pipeline<In, Out, E, R>, stage: Stage.Stage<ReadonlyArray<Out>, Out2, SR>) =>
  make<In, Gathered<Out, Out2>, E | StageError, R | SR | StageRun.Requirements>((items) =>
    Stream.unwrap(
      Effect.map(Stream.runCollect(self.apply(items)), (chunk) => {
        const all = Array.from(chunk).sort((a, b) => a.index - b.index)
        const item: Item<ReadonlyArray<Out>> = {
          index: 0,
          key: `gather-${hashOf(all.map((i) => i.key))}`,
          value: all.map((i) => i.value),
          sources: all.reduce((n, i) => n + i.sources, 0)
        }
        return Stream.fromEffect(
          StageRun.run(stage, item, 1).pipe(
            Effect.flatMap((output) => dropOnNone(item, output)),
            Effect.map(Option.map((output): Item<Gathered<Out, Out2>> => ({ ...item, value: { items: item.value, output } })))
          )
        ).pipe(Stream.filterMap((output) => output))
      })
    )
  ))
