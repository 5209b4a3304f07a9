/**
 * The end of a spawned task: how its fiber's exit becomes its terminal
 * record. `settledRecord` is the pure rule; `settle` applies it once under
 * the task's lock, records it, publishes it and sends the notice.
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import * as Task from "../Task.js"
import * as TaskEvents from "./taskEvents.js"
import * as Registry from "./taskRegistry.js"

/** A copy that survives a JSON round trip, or nothing. */
export const plainJson = (value: unknown): unknown => {
  if (value === undefined) return undefined
  try {
    const text = JSON.stringify(value)
    return text === undefined ? undefined : JSON.parse(text)
  } catch {
    return undefined
  }
}

/** `_tag` of the first typed failure, if it has one. */
export const failureTag = (cause: Cause.Cause<unknown>): string | undefined =>
  Option.match(Cause.failureOption(cause), {
    onNone: () => undefined,
    onSome: (error) =>
      Predicate.hasProperty(error, "_tag") && typeof error._tag === "string" ? error._tag : undefined
  })

export interface SettleContext {
  readonly now: number
  /** `kill` asked for this end. */
  readonly killRequested: boolean
  /** The manager is shutting down. */
  readonly closing: boolean
}

/**
 * The terminal record for `exit`. An interruption is `killed` unless the
 * runtime is shutting down under the task without anyone asking, which is
 * `interrupted`. `lostResult` says a success value was dropped as not JSON.
 */
export const settledRecord = <A, I>(
  record: Task.TaskRecord,
  exit: Exit.Exit<A, unknown>,
  context: SettleContext,
  schema?: Schema.Schema<A, I>
): { readonly next: Task.TaskRecord; readonly lostResult: boolean } => {
  const base = { ...record, updatedAt: context.now, endedAt: context.now, notified: false }
  let next: Task.TaskRecord
  let lostResult = false
  if (Exit.isSuccess(exit)) {
    const result = schema === undefined
      ? plainJson(exit.value)
      : Either.getOrUndefined(Either.map(Schema.encodeEither(schema)(exit.value), plainJson))
    lostResult = result === undefined && exit.value !== undefined
    next = { ...base, status: "completed", result }
  } else if (Cause.isInterruptedOnly(exit.cause)) {
    next = { ...base, status: context.killRequested || !context.closing ? "killed" : "interrupted" }
  } else {
    next = { ...base, status: "failed", error: Cause.pretty(exit.cause), errorTag: failureTag(exit.cause) }
  }
  const to = Either.getOrElse(Task.transition(record.id, record.status, next.status), () => "failed" as const)
  return { next: { ...next, status: to }, lostResult }
}

/** Applies a fiber's exit once; later calls (kill's fallback) find it terminal. */
export const settle = <A, I>(
  registry: Registry.Registry,
  entry: Registry.Entry,
  exit: Exit.Exit<A, unknown>,
  schema?: Schema.Schema<A, I>
): Effect.Effect<void> =>
  entry.lock.withPermits(1)(
    Effect.gen(function*() {
      const record = entry.record
      if (Task.isTerminal(record.status)) return
      const now = yield* Clock.currentTimeMillis
      const closing = yield* Ref.get(registry.closing)
      const { lostResult, next } = settledRecord(record, exit, { now, killRequested: entry.killRequested, closing }, schema)
      if (lostResult) yield* Effect.logWarning(`the result of task ${record.id} is not JSON; the record keeps none`)
      // The fiber is over whatever the disk says; a lost write shows as `interrupted` on the next start.
      entry.record = next
      yield* registry.store.write(next).pipe(
        Effect.catchAll((error) => Effect.logWarning(`could not record the end of task ${record.id}`, error))
      )
      yield* registry.publish(TaskEvents.updated(record.id, { status: next.status, end_time: now, error: next.error }))
    })
  ).pipe(Effect.zipRight(Registry.finish(registry, entry)), Effect.uninterruptible)
