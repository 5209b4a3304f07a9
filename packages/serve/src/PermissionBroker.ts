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
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as PendingAsks from "./internal/pendingAsks.js"
import { PermissionNotFound } from "./ServeError.js"

export type Pending = PendingAsks.Pending<Canonical.PermissionRequest>

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
    const reason = `no client answered within ${Duration.format(timeout)}: denied by the server's policy`
    const asks = PendingAsks.make<Canonical.PermissionRequest, Resolution>(timeout, () => ({ reply: "reject", message: reason }))
    return PermissionBroker.of({
      ask: (cliSessionId, request, onResolved) =>
        asks.wait(cliSessionId, request.requestId).pipe(
          Effect.tap(onResolved),
          Effect.map(decision),
          Effect.withSpan("PermissionBroker.ask")
        ),
      announce: asks.announce,
      withdraw: asks.withdraw,
      pending: asks.pending,
      reply: (id, resolution) =>
        Effect.flatMap(asks.answer(id, resolution), (first) =>
          first ? Effect.void : Effect.fail(new PermissionNotFound({ requestID: id }))),
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

