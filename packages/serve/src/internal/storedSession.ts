/**
 * A live session's side of the SQL session store: what `LiveSession` does
 * differently when the registry has a store.
 *
 * - The transcript is mirrored before a turn's end goes out; a sync that
 *   fails is the session's `session.error`, and is tried again in the
 *   background until the store takes it (the mirror catches up from its
 *   offset; the CLI's own file is never touched).
 * - A batch of events the store refuses (the database restarts) is held and
 *   retried; when it is taken, a `session.error` goes first.
 * - Each ask is a row from its announcement to its reply; the rows of a
 *   session that stops are closed with it.
 */
import { Canonical } from "@skein/protocol"
import type { EventLog } from "@skein/store"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FiberHandle from "effect/FiberHandle"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import type { ServerEvents } from "../ServerEvents.js"
import type { SessionStore } from "./sessionStore.js"

/**
 * How long a session holds its events (or retries a sync) while the store
 * refuses them: 200 ms doubling to every 2 s, for up to 5 minutes; past
 * that the session stops as with any log that refuses writes.
 */
const storeRetry = Schedule.exponential("200 millis").pipe(
  Schedule.union(Schedule.spaced("2 seconds")),
  Schedule.upTo("5 minutes")
)

export interface Options {
  readonly store: SessionStore
  readonly events: ServerEvents["Type"]
  readonly directory: string
  readonly sessionID: string
  readonly cliSessionId: string
  /** The CLI's config root, where its transcript is. */
  readonly configDir: string
}

export interface StoredSession {
  readonly publish: (events: ReadonlyArray<Canonical.CanonicalEvent>) => Effect.Effect<ReadonlyArray<unknown>, EventLog.EventLogError>
  /** Mirrors the transcript; the `session.error` to publish before the turn's end when that failed. */
  readonly beforeTurnEnd: Effect.Effect<Canonical.CanonicalEvent | undefined>
  /** The ledger's write for an announced ask (`requestId`: the CLI's) or a reply; undefined for other events. */
  readonly record: (event: Canonical.CanonicalEvent, requestId: string | undefined) => Effect.Effect<void> | undefined
}

const storeError = (sessionID: string, name: string, message: string) =>
  Canonical.event("session.error", { sessionID, error: { name, data: { message } } })

/**
 * Call before the CLI starts, in the session's scope: its finalizer then
 * runs after the CLI stopped, mirroring what it wrote last and closing the
 * asks no one can answer any more.
 */
export const make = (options: Options): Effect.Effect<StoredSession, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { store, sessionID } = options
    const target = { configDir: options.configDir, cliSessionId: options.cliSessionId, sessionId: sessionID }
    yield* Effect.addFinalizer(() =>
      Effect.ignore(Effect.zipRight(store.mirror.sync(target), store.asks.closeSession(options.cliSessionId, "reject", "session stopped")))
    )
    // One catch-up at a time.
    const catchUp = yield* FiberHandle.make<void, never>()

    const publish = (events: ReadonlyArray<Canonical.CanonicalEvent>) =>
      Effect.gen(function*() {
        const first = yield* Effect.either(options.events.publish(options.directory, events))
        if (Either.isRight(first)) return first.right
        yield* Effect.logWarning("LiveSession: the session store refused events; holding them", first.left)
        const since = Date.now()
        const lost = () =>
          storeError(
            sessionID,
            "StoreFailed",
            `the session store refused this session's events for ${Math.round((Date.now() - since) / 100) / 10} s (${first.left.message}); they were held and follow`
          )
        return yield* Effect.retry(Effect.suspend(() => options.events.publish(options.directory, [lost(), ...events])), storeRetry)
      })

    const beforeTurnEnd = store.mirror.sync(target).pipe(
      Effect.as(undefined),
      Effect.catchAll((error) =>
        Effect.logWarning("LiveSession: the transcript mirror is behind", error).pipe(
          Effect.zipRight(FiberHandle.run(catchUp, store.mirror.sync(target).pipe(Effect.retry(storeRetry), Effect.ignore), { onlyIfMissing: true })),
          Effect.as(storeError(sessionID, error._tag, error.message))
        )
      )
    )

    /** The ledger is a record for other incarnations: a store that fails it leaves the ask working here. */
    const ledger = <A, E>(effect: Effect.Effect<A, E>) =>
      Effect.catchAll(Effect.asVoid(effect), (error) => Effect.logWarning("LiveSession: the ask ledger refused a write", error))

    const record = (event: Canonical.CanonicalEvent, requestId: string | undefined): Effect.Effect<void> | undefined => {
      switch (event.type) {
        case "permission.asked":
        case "question.asked":
          return requestId === undefined ? undefined : ledger(store.asks.open({
            id: event.properties.id,
            kind: event.type === "permission.asked" ? "permission" : "question",
            cliSessionId: options.cliSessionId,
            requestId,
            directory: options.directory,
            request: event.properties
          }))
        case "permission.replied":
          return ledger(store.asks.close(event.properties.requestID, event.properties.reply))
        case "question.replied":
          return ledger(store.asks.close(event.properties.requestID, "answered"))
        case "question.rejected":
          return ledger(store.asks.close(event.properties.requestID, "reject"))
        default:
          return undefined
      }
    }

    return { publish, beforeTurnEnd, record }
  })
