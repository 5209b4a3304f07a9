/**
 * A session's spans. A session is its own trace: its span is a root, linked
 * to the span that started it, and everything the session does — turns, tool
 * calls, control requests both ways — is under it. Whoever asked for a turn
 * or a request (an HTTP handler, say) is a link, since the work outlives it.
 *
 * Spans here open at one reader event and close at another, so they are made
 * with `Effect.makeSpan` and ended by hand; whatever is still open when the
 * session's scope closes is ended then. No span is opened per stream line:
 * per message, only a scan of its content blocks for tool calls.
 */
import { Anthropic, type CliMessage } from "@skein/protocol"
import { Clock, Effect, Exit, FiberId, Option, Scope, Tracer } from "effect"
import type { TurnSummary } from "../Turn.js"

/** Attribute names; `gen_ai.*` follow OpenTelemetry's GenAI conventions. */
export const Attr = {
  sessionId: "skein.session.id",
  cwd: "skein.session.cwd",
  cliVersion: "skein.cli.version",
  model: "skein.session.model",
  pid: "process.pid",
  resume: "skein.session.resume",
  turnIndex: "skein.turn.index",
  turnOrigin: "skein.turn.origin",
  turnResults: "skein.turn.results",
  turnCost: "skein.turn.cost_usd",
  inputTokens: "gen_ai.usage.input_tokens",
  outputTokens: "gen_ai.usage.output_tokens",
  cacheReadTokens: "skein.turn.cache_read_input_tokens",
  cacheCreationTokens: "skein.turn.cache_creation_input_tokens",
  interrupted: "skein.turn.interrupted",
  isError: "skein.turn.is_error",
  endReason: "skein.turn.end_reason",
  liveTasks: "skein.turn.live_tasks",
  toolName: "gen_ai.tool.name",
  toolCallId: "gen_ai.tool.call.id",
  permission: "skein.tool.permission",
  toolIsError: "skein.tool.is_error",
  subtype: "skein.control.subtype",
  requestId: "skein.control.request_id",
  direction: "skein.control.direction"
} as const

export type Direction = "host_to_cli" | "cli_to_host"

/** A tool call's permission: decided by the host, or never asked (allowed by flags or rules). */
export type Permission = "allow" | "deny" | "not_asked"

export interface SessionTrace {
  readonly span: Tracer.Span
  /** Where a span of the session goes now: the live turn, else the session. */
  readonly parent: Effect.Effect<Tracer.Span>
  readonly onInit: (message: CliMessage.Init) => Effect.Effect<void>
  readonly turnStarted: (
    turn: { readonly index: number; readonly origin: string },
    links: ReadonlyArray<Tracer.SpanLink>
  ) => Effect.Effect<Tracer.Span>
  readonly turnEnded: (span: Tracer.Span, summary: TurnSummary) => Effect.Effect<void>
  /** `turnEnded` as a synchronous step, at `nanos` on the session's clock. */
  readonly unsafeTurnEnded: (span: Tracer.Span, summary: TurnSummary, nanos: bigint) => void
  readonly turnFailed: (span: Tracer.Span, error: unknown) => Effect.Effect<void>
  /** Opens a tool span at each `tool_use` and ends it at its `tool_result`. */
  readonly onMessage: (message: CliMessage.Assistant | CliMessage.User) => Effect.Effect<void>
  /** A tool call's span, opened here when the CLI asks about the tool before printing its `tool_use`. */
  readonly tool: (toolUseId: string, name: string | undefined) => Effect.Effect<Tracer.Span | undefined>
  readonly decided: (toolUseId: string, permission: Permission) => Effect.Effect<void>
  /** A control request's span; its caller, if it has a span, is a link. */
  readonly request: (
    direction: Direction,
    attributes: { readonly subtype: string; readonly requestId: string },
    parent?: Tracer.Span | undefined
  ) => Effect.Effect<Tracer.Span>
}

/** Spans are made on reader events: a stack trace per span would only cost. */
const options = { captureStackTrace: false } as const

/** The span the caller runs in, as a link. */
export const callerLinks: Effect.Effect<ReadonlyArray<Tracer.SpanLink>> = Effect.map(
  // The parent span as a service: what `currentParentSpan` reads, without its failure and recovery.
  Effect.serviceOption(Tracer.ParentSpan),
  Option.match({
    onNone: () => [],
    onSome: (span): ReadonlyArray<Tracer.SpanLink> => [{ _tag: "SpanLink", span, attributes: {} }]
  })
)

/**
 * Effect's own tracer builds a span's ids a character at a time, which V8
 * keeps as a chain of about 24 cons strings (some 800 bytes per span) until
 * something reads a character of them and makes it flatten the chain. A
 * session holds its own span and the one that started it for its whole life.
 */
const flattenIds = (span: Tracer.AnySpan): void => {
  span.traceId.charCodeAt(0)
  span.spanId.charCodeAt(0)
}

/** Ends `span` now, unless it already ended. */
export const end = (span: Tracer.Span, exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> =>
  Effect.flatMap(Clock.currentTimeNanos, (now) =>
    Effect.sync(() => {
      if (span.status._tag !== "Ended") span.end(now, exit)
    }))

/** How a span ends that its closing event never came for. */
const unfinished = Exit.interrupt(FiberId.none)

const turnAttributes = (summary: TurnSummary): Record<string, unknown> => ({
  [Attr.turnResults]: summary.results.length,
  [Attr.turnCost]: summary.costUsd,
  [Attr.inputTokens]: summary.usage.inputTokens,
  [Attr.outputTokens]: summary.usage.outputTokens,
  [Attr.cacheReadTokens]: summary.usage.cacheReadInputTokens,
  [Attr.cacheCreationTokens]: summary.usage.cacheCreationInputTokens,
  [Attr.interrupted]: summary.interrupted,
  [Attr.isError]: summary.isError,
  [Attr.endReason]: summary.endReason,
  [Attr.liveTasks]: summary.liveTasks.length
})

const isToolBlock = (block: { readonly type: string }) => block.type === "tool_use" || block.type === "tool_result"

interface ToolCall {
  readonly span: Tracer.Span
  permission: Permission
}

/** Opens the session's span in the current scope; what is still open at its close ends with it. */
export const make = (session: {
  readonly cwd: string
  readonly pid: number
  readonly resume?: string | undefined
}): Effect.Effect<SessionTrace, never, Scope.Scope> =>
  Effect.gen(function*() {
    const links = yield* callerLinks
    const span = yield* Effect.makeSpanScoped("Session", {
      ...options,
      root: true,
      links,
      attributes: {
        [Attr.cwd]: session.cwd,
        [Attr.pid]: session.pid,
        ...(session.resume === undefined ? {} : { [Attr.resume]: session.resume })
      }
    })
    flattenIds(span)
    for (const link of links) flattenIds(link.span)
    let live: Tracer.Span | undefined
    const tools = new Map<string, ToolCall>()

    const endTool = (id: string, exit: Exit.Exit<unknown, unknown>) =>
      Effect.suspend(() => {
        const call = tools.get(id)
        if (call === undefined) return Effect.void
        tools.delete(id)
        call.span.attribute(Attr.permission, call.permission)
        return end(call.span, exit)
      })
    const endTools = Effect.suspend(() => Effect.forEach([...tools.keys()], (id) => endTool(id, unfinished), { discard: true }))
    // Not `Effect.addFinalizer`, which would keep a snapshot of the FiberRefs for the session's life.
    yield* Scope.addFinalizer(yield* Effect.scope, Effect.suspend(() => Effect.zipRight(endTools, live === undefined ? Effect.void : end(live, unfinished))))

    const openTool = (id: string, name: string | undefined, parent: Tracer.Span) =>
      Effect.map(
        Effect.makeSpan("Session.tool", {
          ...options,
          parent,
          attributes: { [Attr.toolCallId]: id, ...(name === undefined ? {} : { [Attr.toolName]: name }) }
        }),
        (toolSpan) => {
          tools.set(id, { span: toolSpan, permission: "not_asked" })
          return toolSpan
        }
      )

    /** A subagent's tool call goes under the call that started the subagent. */
    const parentOf = (parentToolUseId: string | null) =>
      (parentToolUseId === null ? undefined : tools.get(parentToolUseId)?.span) ?? live ?? span

    /** Called for every assistant and user message: a plain scan, and an effect only for tool blocks. */
    const onMessage = (message: CliMessage.Assistant | CliMessage.User): Effect.Effect<void> => {
      const content = message.message.content
      if (typeof content === "string" || !content.some(isToolBlock)) return Effect.void
      return Effect.forEach(content, (block) => {
        if (!Anthropic.isKnownBlock(block)) return Effect.void
        if (block.type === "tool_use" && !tools.has(block.id)) {
          return Effect.asVoid(openTool(block.id, block.name, parentOf(message.parent_tool_use_id)))
        }
        if (block.type === "tool_result") {
          const call = tools.get(block.tool_use_id)
          if (call !== undefined) call.span.attribute(Attr.toolIsError, block.is_error === true)
          return endTool(block.tool_use_id, Exit.void)
        }
        return Effect.void
      }, { discard: true })
    }

    const unsafeTurnEnded = (turnSpan: Tracer.Span, summary: TurnSummary, now: bigint) => {
      if (live === turnSpan) live = undefined
      for (const [key, value] of Object.entries(turnAttributes(summary))) turnSpan.attribute(key, value)
      if (turnSpan.status._tag !== "Ended") turnSpan.end(now, Exit.void)
    }

    return {
      span,
      parent: Effect.sync(() => live ?? span),
      onInit: (message) =>
        Effect.sync(() => {
          span.attribute(Attr.sessionId, message.session_id)
          span.attribute(Attr.cliVersion, message.claude_code_version)
          span.attribute(Attr.cwd, message.cwd)
          span.attribute(Attr.model, message.model)
        }),
      turnStarted: (turn, links) =>
        Effect.map(
          Effect.makeSpan("Session.turn", {
            ...options,
            parent: span,
            links,
            attributes: { [Attr.turnIndex]: turn.index, [Attr.turnOrigin]: turn.origin }
          }),
          (turnSpan) => (live = turnSpan)
        ),
      turnEnded: (turnSpan, summary) => Effect.map(Clock.currentTimeNanos, (now) => unsafeTurnEnded(turnSpan, summary, now)),
      unsafeTurnEnded,
      turnFailed: (turnSpan, error) =>
        Effect.suspend(() => {
          if (live === turnSpan) live = undefined
          return end(turnSpan, Exit.fail(error))
        }),
      onMessage,
      tool: (id, name) =>
        Effect.suspend(() => {
          const known = tools.get(id)
          if (known !== undefined) return Effect.succeed(known.span)
          return name === undefined ? Effect.succeed(undefined) : openTool(id, name, live ?? span)
        }),
      decided: (id, permission) =>
        Effect.sync(() => {
          const call = tools.get(id)
          if (call !== undefined) call.permission = permission
        }),
      request: (direction, attributes, parent) =>
        Effect.flatMap(callerLinks, (links) =>
          Effect.makeSpan(`Session.${direction === "host_to_cli" ? "request" : "cliRequest"} ${attributes.subtype}`, {
            ...options,
            parent: parent ?? live ?? span,
            // A CLI request is answered in a fiber of the reader's: it has no caller to link.
            links: direction === "host_to_cli" ? links : [],
            kind: direction === "host_to_cli" ? "client" : "server",
            attributes: {
              [Attr.direction]: direction,
              [Attr.subtype]: attributes.subtype,
              [Attr.requestId]: attributes.requestId
            }
          }))
    } satisfies SessionTrace
  })
