/**
 * Host → CLI control requests: ids, the pending map, answers, timeouts.
 *
 * A request is withdrawn (`control_cancel_request`) whenever its caller stops
 * waiting — its own timeout, or an interruption from outside such as an
 * `Effect.timeout` around `request` — so the pending map holds only requests
 * someone still waits for, and the CLI can drop the rest.
 */
import type { ProcessHost } from "@skein/kernel"
import { Control, type HostMessage, type Json } from "@skein/protocol"
import { Deferred, Duration, Effect, Option, type Scope } from "effect"
import { ControlError, ControlTimeout, type RequestError, type TurnError } from "../SessionError.js"

export interface RequestOptions {
  readonly timeout?: Duration.DurationInput | undefined
}

export interface ControlChannel {
  /**
   * Writes the request now and returns the wait for its answer. Writing never
   * fails here: a CLI that is gone fails the wait, with why it went.
   */
  readonly submit: (
    payload: Control.HostRequestPayload,
    options?: RequestOptions
  ) => Effect.Effect<Effect.Effect<Json.JsonObject | undefined, RequestError>>
  readonly request: (
    payload: Control.HostRequestPayload,
    options?: RequestOptions
  ) => Effect.Effect<Json.JsonObject | undefined, RequestError>
  /** Routes a `control_response` from stdout to its waiter. */
  readonly onResponse: (message: Control.ControlResponse) => Effect.Effect<void>
  /** Fails every pending request with `error`. */
  readonly failAll: (error: TurnError) => Effect.Effect<void>
  /** Requests written and not yet answered. */
  readonly pending: Effect.Effect<number>
}

export interface Options {
  readonly write: (message: HostMessage.HostMessage) => Effect.Effect<void, ProcessHost.StdinClosed>
  /** Why the session ended; for a write that found stdin closed. */
  readonly closedError: Effect.Effect<RequestError>
  /** Set once the session has ended: no request is written after. */
  readonly ended: Effect.Effect<Option.Option<TurnError>>
  readonly defaultTimeout?: Duration.DurationInput | undefined
  /** Where withdrawals are written, so that an interrupted caller does not wait for the write. */
  readonly scope: Scope.Scope
}

interface Entry {
  readonly subtype: string
  readonly deferred: Deferred.Deferred<Json.JsonObject | undefined, RequestError>
}

let counter = 0
const nextRequestId = () => `req_${++counter}_${Math.random().toString(36).slice(2, 10)}`

export const make = (options: Options): ControlChannel => {
  const entries = new Map<string, Entry>()

  /** Drops the entry and tells the CLI; the write runs on its own so the caller is not held. */
  const withdraw = (requestId: string) =>
    Effect.suspend(() => {
      if (!entries.delete(requestId)) return Effect.void
      return options.write(Control.cancel(requestId)).pipe(Effect.ignore, Effect.forkIn(options.scope), Effect.asVoid)
    })

  const awaitAnswer = (requestId: string, entry: Entry, timeout: Duration.DurationInput | undefined) => {
    // Interruptible even inside a finalizer, so that a timeout around it can cut it short.
    const answer = Effect.interruptible(Deferred.await(entry.deferred))
    const bounded = timeout === undefined ? answer : answer.pipe(
      Effect.timeoutFail({
        duration: timeout,
        onTimeout: () =>
          new ControlTimeout({
            subtype: entry.subtype,
            requestId,
            timeoutMillis: Duration.toMillis(Duration.decode(timeout))
          })
      }),
      Effect.tapErrorTag("ControlTimeout", () => withdraw(requestId))
    )
    return bounded.pipe(Effect.onInterrupt(() => withdraw(requestId)))
  }

  const submit: ControlChannel["submit"] = (payload, opts) =>
    Effect.gen(function*() {
      const end = yield* options.ended
      if (Option.isSome(end)) return Effect.fail(end.value)
      const requestId = nextRequestId()
      const entry: Entry = { subtype: payload.subtype, deferred: yield* Deferred.make<Json.JsonObject | undefined, RequestError>() }
      entries.set(requestId, entry)
      // The session may have ended (and failed every entry) between the check and the set.
      const endedMeanwhile = yield* options.ended
      if (Option.isSome(endedMeanwhile)) {
        entries.delete(requestId)
        return Effect.fail(endedMeanwhile.value)
      }
      const written = yield* Effect.either(options.write(Control.request(requestId, payload)))
      if (written._tag === "Left") {
        entries.delete(requestId)
        return Effect.flatMap(options.closedError, Effect.fail)
      }
      return awaitAnswer(requestId, entry, opts?.timeout ?? options.defaultTimeout)
    })

  const onResponse = (message: Control.ControlResponse) =>
    Effect.suspend(() => {
      const requestId = message.response.request_id
      const entry = entries.get(requestId)
      if (entry === undefined) return Effect.void
      entries.delete(requestId)
      return message.response.subtype === "success"
        ? Deferred.succeed(entry.deferred, message.response.response)
        : Deferred.fail(entry.deferred, new ControlError({ subtype: entry.subtype, requestId, error: message.response.error }))
    }).pipe(Effect.asVoid)

  const failAll = (error: TurnError) =>
    Effect.suspend(() => {
      const all = [...entries.values()]
      entries.clear()
      return Effect.forEach(all, (entry) => Deferred.fail(entry.deferred, error), { discard: true })
    })

  return {
    submit,
    request: (payload, opts) =>
      Effect.flatten(submit(payload, opts)).pipe(
        Effect.withSpan("Session.request", { attributes: { subtype: payload.subtype } })
      ),
    onResponse,
    failAll,
    pending: Effect.sync(() => entries.size)
  }
}
