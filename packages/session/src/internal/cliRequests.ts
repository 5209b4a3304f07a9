/**
 * CLI → host requests: `can_use_tool`, `hook_callback`, `elicitation`,
 * `mcp_message` (for the host's toolkits), and whatever else the CLI asks. The CLI waits for every answer, so each request
 * runs in a fiber of its own, keyed by its id: a `control_cancel_request`
 * interrupts it (and nothing is written), and every other request gets an
 * answer, an error at worst.
 */
import type { Control, Json } from "@skein/protocol"
import { Control as ControlMessages, type HostMessage } from "@skein/protocol"
import { Cause, Duration, Effect, Option, type Scope } from "effect"
import type { Elicitation } from "../Elicitation.js"
import type { Hooks } from "../Hooks.js"
import { defaultTimeout as defaultPermissionTimeout, deny, type PermissionDecision, type Permissions } from "../Permissions.js"
import type * as SessionState from "../SessionState.js"
import type { Toolkits } from "../Toolkit.js"
import * as LazyFiberMap from "./lazyFiberMap.js"
import * as McpServer from "./mcpServer.js"
import type * as StateCell from "./stateCell.js"
import * as Trace from "./trace.js"

/**
 * What the CLI is told when the host has no `Permissions` service: a denial
 * that names what is missing, so it shows in the tool result and the transcript.
 */
export const noPermissionHandler =
  "Denied by skein: this host has no permission handler (provide a Permissions service to the session to allow tool use that needs approval)."

export const unsupported = (subtype: string) => `unsupported_request: this host does not handle ${subtype}`

export interface Services {
  readonly permissions: Option.Option<Permissions["Type"]>
  readonly hooks: Option.Option<Hooks["Type"]>
  readonly elicitation: Option.Option<Elicitation["Type"]>
  readonly toolkits: Option.Option<Toolkits["Type"]>
}

export interface CliRequests {
  /** The `hooks` field of `initialize`: one callback id per registration. */
  readonly hookConfig: Readonly<Record<string, ReadonlyArray<Control.HookMatcher>>> | undefined
  /** The `sdkMcpServers` field of `initialize`: one name per toolkit. */
  readonly sdkMcpServers: ReadonlyArray<string> | undefined
  readonly onRequest: (message: Control.CliRequest) => Effect.Effect<void>
  /** A request of a kind this host does not know still gets an answer. */
  readonly onUnknown: (json: Json.JsonObject, subtype: string | undefined) => Effect.Effect<void>
  readonly onCancel: (requestId: string) => Effect.Effect<void>
  /** Requests being answered now: while there are any, the CLI waits on the host. */
  readonly inFlight: Effect.Effect<number>
  /** Interrupts every request being answered. */
  readonly clear: Effect.Effect<void>
}

type Registration = Hooks["Type"]["registrations"][number]

const hookRegistry = (hooks: Option.Option<Hooks["Type"]>) => {
  const handlers = new Map<string, Registration>()
  const config: Record<string, Array<Control.HookMatcher>> = {}
  for (const registration of Option.match(hooks, { onNone: () => [], onSome: (h) => h.registrations })) {
    const id = `hook_${handlers.size + 1}`
    handlers.set(id, registration)
    const matchers = config[registration.event] ?? (config[registration.event] = [])
    matchers.push({
      hookCallbackIds: [id],
      ...(registration.matcher === undefined ? {} : { matcher: registration.matcher }),
      ...(registration.timeout === undefined ? {} : { timeout: registration.timeout })
    })
  }
  return { handlers, config: handlers.size === 0 ? undefined : config }
}

/** What `initialize` carries for these services; known before the CLI is spawned (SessionPool keys on it). */
export const initializeFields = (services: Pick<Services, "hooks" | "toolkits">): Pick<CliRequests, "hookConfig" | "sdkMcpServers"> => {
  const names = Option.match(services.toolkits, { onNone: () => [], onSome: (t) => t.servers.map((server) => server.name) })
  return {
    hookConfig: hookRegistry(services.hooks).config,
    sdkMcpServers: names.length === 0 ? undefined : Array.from(new Set(names))
  }
}

const pendingOf = (requestId: string, request: Control.CanUseTool): SessionState.PendingPermission => ({
  requestId,
  toolName: request.tool_name,
  toolUseId: request.tool_use_id,
  input: request.input
})

/** Without an Elicitation service the CLI's MCP elicitations are declined. */
const elicit = (services: Services, request: Control.Elicitation) =>
  Option.match(services.elicitation, {
    onNone: () => Effect.succeed<Control.ElicitationResult>({ action: "decline" }),
    onSome: (service) => service.elicit(request)
  }).pipe(Effect.map((result): Json.JsonObject => ({ ...result })))

export const make = (options: {
  readonly services: Services
  readonly state: StateCell.StateCell<SessionState.SessionState>
  readonly write: (message: HostMessage.HostMessage) => Effect.Effect<void, unknown>
  /** Where each request's span goes; none without it. */
  readonly trace?: Trace.SessionTrace | undefined
}): Effect.Effect<CliRequests, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { services, state, trace, write } = options
    const fibers = LazyFiberMap.make<string>(yield* Effect.scope)
    const hooks = hookRegistry(services.hooks)
    const servers = new Map(
      (yield* Effect.forEach(Option.match(services.toolkits, { onNone: () => [], onSome: (t) => t.servers }), McpServer.make))
        .map((server) => [server.name, server])
    )

    const answer = (requestId: string, effect: Effect.Effect<Json.JsonObject>) =>
      effect.pipe(
        Effect.flatMap((response) => write(ControlMessages.success(requestId, response))),
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.void
            : write(ControlMessages.error(requestId, Cause.pretty(cause)))
        ),
        Effect.ignore
      )

    const decide = (requestId: string, request: Control.CanUseTool): Effect.Effect<PermissionDecision> =>
      Option.match(services.permissions, {
        onNone: () => Effect.succeed(deny(noPermissionHandler)),
        onSome: (policy) => {
          const timeout = policy.timeout ?? defaultPermissionTimeout
          return Effect.flatMap(state.get, (s) =>
            policy.canUseTool({
              sessionId: s.sessionId,
              requestId,
              toolName: request.tool_name,
              toolUseId: request.tool_use_id,
              input: request.input,
              request
            })).pipe(
              Effect.timeoutTo({
                duration: timeout,
                onSuccess: (decision) => decision,
                onTimeout: () =>
                  deny(`The permission request for ${request.tool_name} timed out after ${Duration.format(timeout)}; denied.`)
              })
            )
        }
      })

    const canUseTool = (requestId: string, request: Control.CanUseTool) =>
      state.update((s) => ({ ...s, pendingPermissions: [...s.pendingPermissions, pendingOf(requestId, request)] })).pipe(
        Effect.zipRight(decide(requestId, request)),
        // The CLI runs the tool with `updatedInput`; an allow without one means "as asked".
        Effect.tap((decision) =>
          trace === undefined ? Effect.void : Effect.zipRight(
            trace.decided(request.tool_use_id, decision.behavior),
            Effect.annotateCurrentSpan(Trace.Attr.permission, decision.behavior)
          )
        ),
        Effect.map((decision): Json.JsonObject =>
          decision.behavior === "allow" && decision.updatedInput === undefined
            ? { ...decision, updatedInput: request.input }
            : { ...decision }
        ),
        Effect.ensuring(state.update((s) => ({
          ...s,
          pendingPermissions: s.pendingPermissions.filter((p) => p.requestId !== requestId)
        })))
      )

    const hookCallback = (request: Control.HookCallback) =>
      Effect.suspend(() => {
        const registration = hooks.handlers.get(request.callback_id)
        if (registration === undefined) return Effect.dieMessage(`no hook registered as ${request.callback_id}`)
        return state.get.pipe(
          Effect.flatMap((s) => registration.handle(request.input, { sessionId: s.sessionId, toolUseId: request.tool_use_id })),
          Effect.map((output): Json.JsonObject => ({ ...output }))
        )
      })

    const refuse = (requestId: string, subtype: string) =>
      write(ControlMessages.error(requestId, unsupported(subtype))).pipe(Effect.ignore)

    /**
     * The request's span, current while it is answered: a permission or hook
     * request about a tool call goes under that call's span.
     */
    const traced = (requestId: string, request: Control.CliRequestPayload, effect: Effect.Effect<void>) =>
      trace === undefined ? effect : Effect.gen(function*() {
        const toolUseId = "tool_use_id" in request ? request.tool_use_id : undefined
        const toolName = request.subtype === "can_use_tool" ? request.tool_name : undefined
        const tool = toolUseId === undefined ? undefined : yield* trace.tool(toolUseId, toolName)
        const span = yield* trace.request("cli_to_host", { subtype: request.subtype, requestId }, tool)
        if (toolName !== undefined) span.attribute(Trace.Attr.toolName, toolName)
        return yield* effect.pipe(Effect.withParentSpan(span), Effect.onExit((exit) => Trace.end(span, exit)))
      })

    const run = (requestId: string, request: Control.CliRequestPayload, effect: Effect.Effect<Json.JsonObject>) =>
      fibers.run(requestId, traced(requestId, request, answer(requestId, effect)))

    /** The CLI reads the JSON-RPC answer from `mcp_response`; a tool's run is this request's fiber. */
    const mcpMessage = (requestId: string, request: Control.McpMessage) => {
      const server = servers.get(request.server_name)
      if (server === undefined) {
        return refuse(requestId, servers.size === 0 ? "mcp_message" : `mcp_message for server ${request.server_name}`)
      }
      return run(requestId, request, Effect.map(server.handle(request.message), (response): Json.JsonObject => ({ mcp_response: response })))
    }

    const onRequest = ({ request, request_id: requestId }: Control.CliRequest): Effect.Effect<void> => {
      switch (request.subtype) {
        case "can_use_tool":
          return run(requestId, request, canUseTool(requestId, request))
        case "hook_callback":
          return run(requestId, request, hookCallback(request))
        case "elicitation":
          return run(requestId, request, elicit(services, request))
        case "mcp_message":
          return mcpMessage(requestId, request)
        case "request_user_dialog":
          return traced(requestId, request, refuse(requestId, request.subtype))
      }
    }

    return {
      hookConfig: hooks.config,
      sdkMcpServers: servers.size === 0 ? undefined : Array.from(servers.keys()),
      onRequest,
      onUnknown: (json, subtype) => {
        const requestId = json["request_id"]
        return typeof requestId === "string" ? refuse(requestId, subtype ?? "an unknown request") : Effect.void
      },
      onCancel: fibers.remove,
      inFlight: fibers.size,
      clear: fibers.clear
    } satisfies CliRequests
  })
