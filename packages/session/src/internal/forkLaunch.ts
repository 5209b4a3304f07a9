/**
 * How a worker is launched: its ids, files and CLI options, fixed before its
 * process runs, and the services its session sees.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { ProcessHost } from "@skein/kernel"
import type { Anthropic } from "@skein/protocol"
import { TranscriptLayout, TranscriptStore } from "@skein/store"
import { Context, type Duration, Effect, Option } from "effect"
import { Elicitation } from "../Elicitation.js"
import { Hooks } from "../Hooks.js"
import { Permissions } from "../Permissions.js"
import { Toolkits } from "../Toolkit.js"
import type { Session, SessionOptions } from "../Session.js"
import type { TurnError } from "../SessionError.js"
import type { ForkOptions, Mode } from "../Worker.js"
import * as Internal from "./worker.js"
import { SidechainMisplaced } from "./workerError.js"

export interface ForkPlan {
  readonly mode: Mode
  readonly label: string
  readonly description: string
  readonly agentId: string
  /** Chosen here and passed as `--session-id`, so it is known before the process starts. */
  readonly sessionId: string
  readonly parentSessionId: string
  readonly cwd: string
  /** The CLI's own file of the fork. */
  readonly transcriptPath: string
  readonly sidechain: TranscriptLayout.SubagentPaths
  readonly chain: Internal.ChainContext
  readonly sessionOptions: SessionOptions
  /** The worker's one user message: a custom worker's initial messages, then the prompt. */
  readonly content: string | ReadonlyArray<Anthropic.ContentBlock>
  readonly timeout: Duration.DurationInput | undefined
}

/** The first user message: a custom worker's initial messages as text blocks before the prompt. */
export const content = (fork: ForkOptions): string | ReadonlyArray<Anthropic.ContentBlock> =>
  fork.mode === "custom" && fork.initialMessages !== undefined && fork.initialMessages.length > 0
    ? [...fork.initialMessages, fork.prompt].flatMap((part): ReadonlyArray<Anthropic.ContentBlock> =>
      typeof part === "string" ? [{ type: "text", text: part }] : part
    )
    : fork.prompt

/**
 * Waits for the parent's session id, then fixes everything about the
 * worker. Fails if the store's root is not the parent CLI's config folder.
 */
export const plan = (
  parent: Session,
  launch: SessionOptions,
  fork: ForkOptions
): Effect.Effect<ForkPlan, TurnError | SidechainMisplaced, TranscriptStore.TranscriptStore | FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const store = yield* TranscriptStore.TranscriptStore
    const parentSessionId = yield* parent.sessionId
    const parentState = yield* parent.state.get
    const agentId = fork.mode === "custom" ? Internal.fileSafe(fork.agentId) : Internal.agentId(fork.label)
    const sessionId = Internal.uuid()
    const cwd = yield* TranscriptLayout.canonicalCwd(launch.cwd)
    const parentPaths = store.layout.session(cwd, parentSessionId)
    if (parentState.transcriptPath !== undefined && parentState.transcriptPath !== parentPaths.transcript) {
      return yield* new SidechainMisplaced({ expected: parentState.transcriptPath, actual: parentPaths.transcript })
    }
    const sessionOptions = Internal.sessionOptions(launch, {
      model: fork.mode === "custom" ? fork.model : undefined,
      tools: fork.mode === "custom" ? fork.tools : undefined,
      permissionMode: fork.permissionMode,
      allowedTools: fork.allowedTools,
      disallowedTools: fork.disallowedTools,
      maxTurns: fork.maxTurns
    }, { parentSessionId, sessionId })
    return {
      mode: fork.mode ?? "isolated",
      label: fork.label,
      description: fork.description ?? fork.label,
      agentId,
      sessionId,
      parentSessionId,
      cwd,
      transcriptPath: store.layout.session(cwd, sessionId).transcript,
      sidechain: parentPaths.subagent(agentId),
      chain: { parentSessionId, agentId, cwd },
      sessionOptions,
      content: content(fork),
      timeout: fork.timeout
    }
  })

/** The parent's handlers, as they were in context where the pool was made. */
export interface SharedHandlers {
  readonly permissions: Option.Option<Permissions["Type"]>
  readonly hooks: Option.Option<Hooks["Type"]>
  readonly elicitation: Option.Option<Elicitation["Type"]>
  /** The parent's toolkits: every worker gets them unless its options say `toolkits: "none"`. */
  readonly toolkits?: Option.Option<Toolkits["Type"]> | undefined
}

/**
 * The worker session's services: its own policy, or the parent's handlers
 * for `interactive`; the parent's toolkits unless told otherwise; never the
 * parent's TaskManager (so not listed here).
 */
export const services = (
  fork: ForkOptions,
  host: ProcessHost.ProcessHost["Type"],
  shared: SharedHandlers
): Context.Context<ProcessHost.ProcessHost> => {
  let context = Context.make(ProcessHost.ProcessHost, host)
  if (fork.toolkits !== "none" && shared.toolkits !== undefined && Option.isSome(shared.toolkits)) {
    context = Context.add(context, Toolkits, shared.toolkits.value)
  }
  if (fork.mode === "interactive") {
    if (Option.isSome(shared.permissions)) context = Context.add(context, Permissions, shared.permissions.value)
    if (Option.isSome(shared.hooks)) context = Context.add(context, Hooks, shared.hooks.value)
    if (Option.isSome(shared.elicitation)) context = Context.add(context, Elicitation, shared.elicitation.value)
  } else if (fork.permissions !== undefined) {
    context = Context.add(context, Permissions, fork.permissions)
  }
  return context
}
