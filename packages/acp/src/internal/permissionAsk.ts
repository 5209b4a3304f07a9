/**
 * A session's answer to the CLI's `can_use_tool`: the client's, asked with
 * `session/request_permission` (allow once, always for the session,
 * reject). A `session/cancel` withdraws an ask that is still open: the
 * request to the client is cancelled (`$/cancel_request`) and the CLI is
 * told no, with an interrupt. In `bypassPermissions` nobody is asked.
 */
import type * as Acp from "@agentclientprotocol/sdk/unstable"
import { Permissions } from "@skein/session"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import type { Client } from "./liveSession.js"
import * as ToolCalls from "./toolCalls.js"

const options: Array<Acp.PermissionOption> = [
  { optionId: "allow_once", name: "Allow once", kind: "allow_once" },
  { optionId: "allow_always", name: "Always allow in this session", kind: "allow_always" },
  { optionId: "reject", name: "Reject", kind: "reject_once" }
]

export interface Context {
  readonly acpId: string
  readonly client: Client
  readonly mode: SubscriptionRef.SubscriptionRef<string>
  /** Tools the client allowed for the rest of the session. */
  readonly alwaysAllowed: Ref.Ref<ReadonlySet<string>>
  /** Bumped by each cancel: an ask that began before it is withdrawn. */
  readonly cancels: SubscriptionRef.SubscriptionRef<number>
}

export const make = (context: Context) => (request: Permissions.PermissionRequest): Effect.Effect<Permissions.PermissionDecision> =>
  Effect.gen(function*() {
    if ((yield* SubscriptionRef.get(context.mode)) === "bypassPermissions") return Permissions.allow()
    if ((yield* Ref.get(context.alwaysAllowed)).has(request.toolName)) return Permissions.allow()
    const epoch = yield* SubscriptionRef.get(context.cancels)
    const cli = { tool: request.toolName, input: request.input }
    const asked = context.client.requestPermission({
      sessionId: context.acpId,
      toolCall: {
        toolCallId: request.toolUseId,
        title: ToolCalls.titleOf(cli),
        kind: ToolCalls.kindOf(request.toolName),
        status: "pending",
        locations: ToolCalls.locationsOf(cli),
        rawInput: request.input
      },
      options
    })
    const withdrawn = context.cancels.changes.pipe(Stream.filter((n) => n > epoch), Stream.runHead, Effect.as(undefined))
    const answer = yield* Effect.raceFirst(Effect.option(asked), withdrawn)
    if (answer === undefined || Option.isNone(answer) || answer.value.outcome.outcome === "cancelled") {
      return Permissions.deny("The user cancelled the turn", { interrupt: true })
    }
    switch (answer.value.outcome.optionId) {
      case "allow_always":
        yield* Ref.update(context.alwaysAllowed, (set) => new Set([...set, request.toolName]))
        return Permissions.allow()
      case "allow_once":
        return Permissions.allow()
      default:
        return Permissions.deny("The user rejected this tool call")
    }
  })
