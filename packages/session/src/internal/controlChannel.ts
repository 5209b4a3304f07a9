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
import { Deferred, Duration, Effect, Exit, FiberId, Option, type Scope, type Tracer } from "effect"
import { ControlError, ControlTimeout, type RequestError, type TurnError } from "../SessionError.js"
import * as Trace from "./trace.js"

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
  /** Where each request's span goes; none without it. */
  readonly trace?: Trace.SessionTrace | undefined
}

interface Entry {
  readonly subtype: string
  readonly deferred: Deferred.Deferred<Json.JsonObject | undefined, RequestError>
  /** Open from the write to the answer (or the withdrawal). */
  readonly span: Tracer.Span | undefined
}

/** Ends the entry's span with how the request went; later ends are no-ops. */
const endSpan = (entry: Entry, exit: Exit.Exit<unknown, unknown>) =>
  entry.span === undefined ? Effect.void : Trace.end(entry.span, exit)

/** Answers the waiter and ends the span with the same outcome. */
const complete = (entry: Entry, exit: Exit.Exit<Json.JsonObject | undefined, RequestError>) =>
  Effect.zipRight(endSpan(entry, exit), Deferred.done(entry.deferred, exit))

let counter = 0
const nextRequestId = () => `req_${++counter}_${Math.random().toString(36).slice(2, 10)}`

export const make = (options: Options): ControlChannel => {
  const entries = new Map<string, Entry>()

  /** Drops the entry and tells the CLI; the write runs on its own so the caller is not held. */
  const withdraw = (requestId: string) =>
    Effect.suspend(() => {
      const entry = entries.get(requestId)
      if (entry === undefined) return Effect.void
      entries.delete(requestId)
      return endSpan(entry, Exit.interrupt(FiberId.none)).pipe(
        Effect.zipRight(options.write(Control.cancel(requestId)).pipe(Effect.ignore, Effect.forkIn(options.scope))),
        Effect.asVoid
      )
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
      Effect.tapErrorTag("ControlTimeout", (timedOut) => Effect.zipRight(endSpan(entry, Exit.fail(timedOut)), withdraw(requestId)))
    )
    return bounded.pipe(Effect.onInterrupt(() => withdraw(requestId)))
  }

  const submit: ControlChannel["submit"] = (payload, opts) =>
    Effect.gen(function*() {
      const end = yield* options.ended
      if (Option.isSome(end)) return Effect.fail(end.value)
      const requestId = nextRequestId()
      const entry: Entry = {
        subtype: payload.subtype,
        deferred: yield* Deferred.make<Json.JsonObject | undefined, RequestError>(),
        span: options.trace === undefined
          ? undefined
          : yield* options.trace.request("host_to_cli", { subtype: payload.subtype, requestId })
      }
      entries.set(requestId, entry)
      // The session may have ended (and failed every entry) between the check and the set.
      const endedMeanwhile = yield* options.ended
      if (Option.isSome(endedMeanwhile)) {
        entries.delete(requestId)
        yield* endSpan(entry, Exit.fail(endedMeanwhile.value))
        return Effect.fail(endedMeanwhile.value)
      }
      const written = yield* Effect.either(options.write(Control.request(requestId, payload)))
      if (written._tag === "Left") {
        entries.delete(requestId)
        yield* endSpan(entry, Exit.fail(written.left))
        // Why it closed is known only once the reader sees the exit: the caller waits for that, not `submit`.
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
      return complete(
        entry,
        message.response.subtype === "success"
          ? Exit.succeed(message.response.response)
          : Exit.fail(new ControlError({ subtype: entry.subtype, requestId, error: message.response.error }))
      )
    }).pipe(Effect.asVoid)

  const failAll = (error: TurnError) =>
    Effect.suspend(() => {
      const all = [...entries.values()]
      entries.clear()
      return Effect.forEach(all, (entry) => complete(entry, Exit.fail(error)), { discard: true })
    })

  return {
    submit,
    // The request's span is the entry's (`trace.request`), in the session's trace.
    request: (payload, opts) => Effect.flatten(submit(payload, opts)),
    onResponse,
    failAll,
    pending: Effect.sync(() => entries.size)
  }
}
