/**
 * Permission asks between the CLI and whichever client answers.
 *
 * The CLI waits on every `can_use_tool`, and opencode's own server hangs
 * forever when no client answers. Here an ask is listed while pending
 * (`GET /permission`, re-announced to every new subscriber), the first
 * answer from any client resolves it once (later answers get
 * `PermissionNotFound`), and a policy denies it, with the reason, when no
 * one answers in time.
 */
import type { Canonical } from "@skein/protocol"
import { Permissions } from "@skein/session"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import * as Layer from "effect/Layer"
import { PermissionNotFound } from "./ServeError.js"

export interface Pending {
  readonly directory: string
  readonly request: Canonical.PermissionRequest
}

/** Who resolved an ask: a client's reply, or the timeout policy. */
export interface Resolution {
  readonly reply: Canonical.PermissionReply
  readonly message?: string | undefined
}

export class PermissionBroker extends Context.Tag("@skein/serve/PermissionBroker")<PermissionBroker, {
  /** The CLI's side: waits for an answer or the policy's deny. */
  readonly ask: (
    cliSessionId: string,
    request: Permissions.PermissionRequest,
    onResolved: (resolution: Resolution) => Effect.Effect<void>
  ) => Effect.Effect<Permissions.PermissionDecision>
  /** The translator named the ask (its `per_` id and event): it is now listed and can be answered. */
  readonly announce: (cliSessionId: string, requestId: string, directory: string, request: Canonical.PermissionRequest) => Effect.Effect<void>
  /** The CLI withdrew the request, or the session ended. */
  readonly withdraw: (cliSessionId: string, requestId: string) => Effect.Effect<void>
  readonly pending: (directory?: string) => Effect.Effect<ReadonlyArray<Pending>>
  readonly reply: (id: string, resolution: Resolution) => Effect.Effect<void, PermissionNotFound>
  readonly timeout: Duration.Duration
}>() {}

interface Entry {
  readonly key: string
  readonly answer: Deferred.Deferred<Resolution>
  announced: Pending | undefined
}

export interface Options {
  /** Deny after this long without an answer. Default 5 minutes. */
  readonly timeout?: Duration.DurationInput | undefined
}

export const decision = (resolution: Resolution): Permissions.PermissionDecision =>
  resolution.reply === "reject"
    ? Permissions.deny(resolution.message ?? "the user rejected this tool call")
    : Permissions.allow()

export const make = (options: Options = {}) =>
  Effect.sync(() => {
    const timeout = Duration.decode(options.timeout ?? Permissions.defaultTimeout)
    const entries = new Map<string, Entry>()
    const byId = new Map<string, string>()
    const keyOf = (cliSessionId: string, requestId: string) => `${cliSessionId}/${requestId}`
    const entryFor = (key: string) => {
      const existing = entries.get(key)
      if (existing !== undefined) return existing
      const entry: Entry = { key, answer: Deferred.unsafeMake<Resolution>(FiberId.none), announced: undefined }
      entries.set(key, entry)
      return entry
    }
    const remove = (entry: Entry) => {
      entries.delete(entry.key)
      if (entry.announced !== undefined) byId.delete(entry.announced.request.id)
    }
    const reason = `no client answered within ${Duration.format(timeout)}: denied by the server's policy`

    const ask = (cliSessionId: string, request: Permissions.PermissionRequest, onResolved: (r: Resolution) => Effect.Effect<void>) =>
      Effect.gen(function*() {
        const entry = yield* Effect.sync(() => entryFor(keyOf(cliSessionId, request.requestId)))
        // Removed however the wait ends: a session stopped mid-ask must not leave it listed.
        const resolution = yield* Deferred.await(entry.answer).pipe(
          Effect.timeoutTo({ duration: timeout, onSuccess: (r) => r, onTimeout: (): Resolution => ({ reply: "reject", message: reason }) }),
          Effect.ensuring(Effect.sync(() => remove(entry)))
        )
        yield* onResolved(resolution)
        return decision(resolution)
      }).pipe(Effect.withSpan("PermissionBroker.ask"))

    return PermissionBroker.of({
      ask,
      announce: (cliSessionId, requestId, directory, request) =>
        Effect.sync(() => {
          const entry = entryFor(keyOf(cliSessionId, requestId))
          entry.announced = { directory, request }
          byId.set(request.id, entry.key)
        }),
      withdraw: (cliSessionId, requestId) =>
        Effect.sync(() => {
          const entry = entries.get(keyOf(cliSessionId, requestId))
          if (entry !== undefined) remove(entry)
        }),
      pending: (directory) =>
        Effect.sync(() =>
          [...entries.values()].flatMap((e) =>
            e.announced !== undefined && (directory === undefined || e.announced.directory === directory) ? [e.announced] : []
          )
        ),
      reply: (id, resolution) =>
        Effect.gen(function*() {
          const key = byId.get(id)
          const entry = key === undefined ? undefined : entries.get(key)
          if (entry === undefined) return yield* new PermissionNotFound({ requestID: id })
          byId.delete(id)
          entry.announced = undefined
          // Only the first answer counts; the CLI side removes the entry once it sees it.
          if (!(yield* Deferred.succeed(entry.answer, resolution))) return yield* new PermissionNotFound({ requestID: id })
        }),
      timeout
    })
  })

export const layer = (options?: Options): Layer.Layer<PermissionBroker> => Layer.effect(PermissionBroker, make(options))

/** The session's `Permissions` service over the broker, for one CLI session. */
export const permissionsFor = (
  broker: PermissionBroker["Type"],
  cliSessionId: string,
  onResolved: (request: Permissions.PermissionRequest, resolution: Resolution) => Effect.Effect<void>
): Permissions.Permissions["Type"] =>
  Permissions.make((request) => broker.ask(cliSessionId, request, (r) => onResolved(request, r)), {
    // The session's own bound only backs up the broker's.
    timeout: Duration.sum(broker.timeout, Duration.seconds(5))
  })

