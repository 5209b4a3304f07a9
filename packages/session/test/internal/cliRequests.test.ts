/**
 * The CLI's requests to the host, alone: each in its own fiber, cancelled by
 * id, answered with an error when the host cannot serve them.
 */
import { describe, expect, it } from "@effect/vitest"
import type { Control, HostMessage } from "@skein/protocol"
import { Deferred, Effect, Option, Ref } from "effect"
import * as StateCell from "../../src/internal/stateCell.js"
import * as CliRequests from "../../src/internal/cliRequests.js"
import * as Permissions from "../../src/Permissions.js"
import * as SessionState from "../../src/SessionState.js"

const canUseTool = (requestId: string): Control.CliRequest => ({
  type: "control_request",
  request_id: requestId,
  request: { subtype: "can_use_tool", tool_name: "Bash", input: { command: "ls" }, tool_use_id: "toolu_1" }
})

const setup = (services: Partial<CliRequests.Services>) =>
  Effect.gen(function*() {
    const written = yield* Ref.make<ReadonlyArray<HostMessage.HostMessage>>([])
    const state = yield* StateCell.make(SessionState.initial({ cwd: "/tmp" }))
    const requests = yield* CliRequests.make({
      services: { permissions: Option.none(), hooks: Option.none(), elicitation: Option.none(), toolkits: Option.none(), ...services },
      state,
      write: (message) => Ref.update(written, (all) => [...all, message])
    })
    /** Waits until `n` messages were written. */
    const writtenN = (n: number) =>
      Ref.get(written).pipe(Effect.repeat({ until: (all) => all.length >= n }), Effect.zipLeft(Effect.yieldNow()))
    return { requests, written, state, writtenN }
  })

const responseOf = (message: HostMessage.HostMessage | undefined) =>
  message?.type === "control_response" ? message.response : undefined

describe("cliRequests", () => {
  it.scoped("failure 11: with no Permissions service, can_use_tool is denied with a message naming the missing handler", () =>
    Effect.gen(function*() {
      const { requests, writtenN } = yield* setup({})
      yield* requests.onRequest(canUseTool("req_1"))
      const [answer] = yield* writtenN(1)
      expect(responseOf(answer)).toMatchObject({
        subtype: "success",
        request_id: "req_1",
        response: { behavior: "deny", message: CliRequests.noPermissionHandler }
      })
    }))

  it.scoped("an allow without updatedInput runs the tool as asked; the pending permission shows in the state meanwhile", () =>
    Effect.gen(function*() {
      const release = yield* Deferred.make<void>()
      const { requests, state, writtenN } = yield* setup({
        permissions: Option.some(Permissions.make(() => Effect.as(Deferred.await(release), Permissions.allow())))
      })
      yield* requests.onRequest(canUseTool("req_2"))
      yield* Effect.yieldNow()
      expect((yield* state.get).pendingPermissions.map((p) => p.requestId)).toEqual(["req_2"])
      expect(yield* requests.inFlight).toBe(1)
      yield* Deferred.succeed(release, undefined)
      const [answer] = yield* writtenN(1)
      expect(responseOf(answer)).toMatchObject({ response: { behavior: "allow", updatedInput: { command: "ls" } } })
      expect((yield* state.get).pendingPermissions).toEqual([])
    }))

  it.scoped("a cancel interrupts the handler, and nothing is written for it", () =>
    Effect.gen(function*() {
      const interrupted = yield* Deferred.make<void>()
      const { requests, written } = yield* setup({
        permissions: Option.some(Permissions.make(() => Effect.never.pipe(Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined)))))
      })
      yield* requests.onRequest(canUseTool("req_3"))
      yield* Effect.yieldNow()
      yield* requests.onCancel("req_3")
      yield* Deferred.await(interrupted)
      expect(yield* Ref.get(written)).toEqual([])
      expect(yield* requests.inFlight).toBe(0)
    }))

  it.scoped("requests this host cannot serve, known or unknown, are answered with an error", () =>
    Effect.gen(function*() {
      const { requests, writtenN } = yield* setup({})
      yield* requests.onRequest({
        type: "control_request",
        request_id: "req_4",
        request: { subtype: "mcp_message", server_name: "sdk", message: { jsonrpc: "2.0", id: 1, method: "ping" } }
      })
      yield* requests.onUnknown({ type: "control_request", request_id: "req_5", request: { subtype: "future" } }, "future")
      const answers = yield* writtenN(2)
      expect(answers.map(responseOf)).toMatchObject([
        { subtype: "error", request_id: "req_4", error: CliRequests.unsupported("mcp_message") },
        { subtype: "error", request_id: "req_5", error: CliRequests.unsupported("future") }
      ])
    }))

  it.scoped("hooks are registered with one callback id each, and a callback reaches its handler", () =>
    Effect.gen(function*() {
      const seen = yield* Ref.make<ReadonlyArray<string>>([])
      const { requests, writtenN } = yield* setup({
        hooks: Option.some({
          registrations: [
            { event: "PreToolUse", matcher: "Bash", handle: () => Effect.as(Ref.update(seen, (s) => [...s, "pre"]), { decision: "approve" }) },
            { event: "Stop", handle: () => Effect.succeed({}) }
          ]
        })
      })
      expect(requests.hookConfig).toEqual({
        PreToolUse: [{ hookCallbackIds: ["hook_1"], matcher: "Bash" }],
        Stop: [{ hookCallbackIds: ["hook_2"] }]
      })
      yield* requests.onRequest({
        type: "control_request",
        request_id: "req_6",
        request: { subtype: "hook_callback", callback_id: "hook_1", input: { tool_name: "Bash" } }
      })
      const [answer] = yield* writtenN(1)
      expect(responseOf(answer)).toMatchObject({ subtype: "success", response: { decision: "approve" } })
      expect(yield* Ref.get(seen)).toEqual(["pre"])
    }))
})
