/**
 * What the memory jobs do, as events: started, skipped (by which gate, and
 * why), wrote which files, failed why. A host forwards them onto the
 * session's event stream; without a `MemoryEvents` service they are only
 * logged.
 *
 * @since 0.0.0
 */
import { Context, Effect, Layer, PubSub, type Queue, type Scope } from "effect"
import type { Problem } from "./MemoryFolder.js"

/**
 * @since 0.0.0
 */
export type Job = "extraction" | "dream" | "session-memory"

/**
 * @since 0.0.0
 */
export type MemoryEvent =
  | { readonly _tag: "Started"; readonly job: Job; readonly sessionId: string; readonly taskId?: string | undefined }
  | { readonly _tag: "Skipped"; readonly job: Job; readonly sessionId: string; readonly gate: string; readonly reason: string }
  | {
    readonly _tag: "Wrote"
    readonly job: Job
    readonly sessionId: string
    readonly files: ReadonlyArray<string>
    readonly removed: ReadonlyArray<string>
    /** What the index check repaired, and what it could not. */
    readonly repaired: ReadonlyArray<Problem>
    readonly remaining: ReadonlyArray<Problem>
  }
  | { readonly _tag: "Failed"; readonly job: Job; readonly sessionId: string; readonly reason: string }

/**
 * @since 0.0.0
 */
export class MemoryEvents extends Context.Tag("@skein/memory/MemoryEvents")<MemoryEvents, {
  readonly publish: (event: MemoryEvent) => Effect.Effect<void>
  readonly subscribe: Effect.Effect<Queue.Dequeue<MemoryEvent>, never, Scope.Scope>
}>() {}

/**
 * @since 0.0.0
 */
export const make: Effect.Effect<MemoryEvents["Type"], never, Scope.Scope> = Effect.map(
  Effect.acquireRelease(PubSub.unbounded<MemoryEvent>(), PubSub.shutdown),
  (hub) => MemoryEvents.of({ publish: (event) => Effect.asVoid(PubSub.publish(hub, event)), subscribe: PubSub.subscribe(hub) })
)

/**
 * @since 0.0.0
 */
export const layer: Layer.Layer<MemoryEvents> = Layer.scoped(MemoryEvents, make)

/**
 * Publishes to the service in context, if any, and logs at debug level.
 *
 * @since 0.0.0
 */
export const emit = (event: MemoryEvent): Effect.Effect<void> =>
  Effect.serviceOption(MemoryEvents).pipe(
    Effect.flatMap((events) => events._tag === "Some" ? events.value.publish(event) : Effect.void),
    Effect.zipRight(Effect.logDebug(`memory ${event.job}: ${event._tag}`, event))
  )
