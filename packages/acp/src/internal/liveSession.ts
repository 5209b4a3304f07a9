/**
 * One ACP session: a Claude Code CLI (a `CompactableSession`, so a pass can
 * set it aside and resume it), the pump that maps its events to
 * `session/update`s, its permission asks, its mode, and its prompts.
 *
 * The pump is the one reader of the CLI's events: it runs the canonical
 * translator over them (`EventTranslator.withTurns`) and sends what
 * `Updates` makes of each canonical event, in order. A prompt answers only
 * once the pump has sent the updates of its turn's results, so a client
 * never sees an update after the prompt's answer.
 */
import type * as Acp from "@agentclientprotocol/sdk/unstable"
import { EventTranslator } from "@skein/canonical"
import { CompactableSession, Compaction } from "@skein/compact"
import type { Anthropic } from "@skein/protocol"
import { Permissions, type Session, type SessionError, type Turn } from "@skein/session"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import { type AcpError, CliDied, PromptInProgress, SessionFailed } from "../AcpError.js"
import * as Commands from "./commands.js"
import * as Modes from "./modes.js"
import * as PermissionAsk from "./permissionAsk.js"
import * as PromptContent from "./promptContent.js"
import * as Pump from "./pump.js"

/** What a session needs of the client's side of the connection. */
export interface Client {
  readonly update: (sessionId: string, update: Acp.SessionUpdate) => Effect.Effect<void>
  /** Interrupting it withdraws the ask (`$/cancel_request`). */
  readonly requestPermission: (request: Acp.RequestPermissionRequest) => Effect.Effect<Acp.RequestPermissionResponse, unknown>
}

export interface Options {
  readonly acpId: string
  readonly session: Session.SessionOptions
  readonly client: Client
  /** Where translation starts: the loaded history's state, so ids go on from it. */
  readonly translator?: EventTranslator.State | undefined
  /** Called once the CLI names its session (its `init`). */
  readonly onCliSessionId?: ((cliSessionId: string) => Effect.Effect<void>) | undefined
  readonly contextWindow?: number | undefined
}

export interface LiveSession {
  readonly acpId: string
  readonly cwd: string
  readonly prompt: (prompt: ReadonlyArray<Acp.ContentBlock>) => Effect.Effect<Acp.StopReason, AcpError, Compaction.RunContext>
  /** Withdraws the prompt's asks, interrupts its turn, and makes it answer `cancelled`. */
  readonly cancel: Effect.Effect<void>
  readonly setMode: (mode: string) => Effect.Effect<void, AcpError>
  readonly mode: Effect.Effect<string>
}

/** A cancelled prompt answers within a second of `session/cancel`, whatever the CLI still does. */
const cancelAnswer = Duration.millis(800)
/** How long the pump may lag the turn's end before the prompt answers anyway. */
const pumpLag = Duration.seconds(2)

const isTooLong = (summary: Turn.TurnSummary) =>
  summary.results.some((r) => /prompt is too long/i.test(r.subtype === "success" ? r.result : (r.errors ?? []).join("\n"))) ||
  /prompt is too long/i.test(summary.text ?? "")

export const stopReasonOf = (summary: Turn.TurnSummary): Acp.StopReason => {
  if (summary.interrupted) return "cancelled"
  if (summary.results.some((r) => r.subtype === "error_max_turns")) return "max_turn_requests"
  if (summary.stopReason === "max_tokens") return "max_tokens"
  if (summary.stopReason === "refusal") return "refusal"
  return "end_turn"
}

const turnFailed = (acpId: string) => (error: SessionError.TurnError): AcpError =>
  error._tag === "CliExited"
    ? new CliDied({ sessionId: acpId, exitCode: error.code, signal: error.signal, stderrTail: error.stderrTail })
    : new SessionFailed({ sessionId: acpId, reason: error._tag === "SessionSilent" ? `the CLI was silent for ${error.silentMillis} ms` : "the session is closed" })

export const start = Effect.fn("AcpSession.start")(function*(options: Options) {
  const { acpId, client } = options
  const scope = yield* Effect.scope
  const mode = yield* SubscriptionRef.make(Modes.initialMode)
  const alwaysAllowed = yield* Ref.make<ReadonlySet<string>>(new Set())
  /** Bumped by each cancel: an ask that began before it is withdrawn. */
  const cancels = yield* SubscriptionRef.make(0)
  const cancelled = yield* Ref.make(Option.none<Deferred.Deferred<void>>())
  /** `result`s the pump has sent the updates of. */
  const resultsSent = yield* SubscriptionRef.make(0)
  const busy = yield* Effect.makeSemaphore(1)
  const update = (u: Acp.SessionUpdate) => client.update(acpId, u)

  const ask = PermissionAsk.make({ acpId, client, mode, alwaysAllowed, cancels })
  const permissions = Permissions.make(ask, { timeout: Duration.hours(24) })

  const compactable = yield* CompactableSession.start(options.session).pipe(
    Effect.provideService(Permissions.Permissions, permissions),
    Effect.mapError((e) => new SessionFailed({ sessionId: acpId, reason: `the CLI did not start: ${e.message}` }))
  )

  yield* Pump.run({
    acpId,
    events: compactable.subscribe,
    update,
    mode,
    resultsSent,
    translator: options.translator ?? EventTranslator.initial({ cliSessionId: acpId, cwd: options.session.cwd }),
    contextWindow: options.contextWindow,
    onCliSessionId: options.onCliSessionId
  })

  // ---- prompts -------------------------------------------------------------
  const say = (text: string) => update({ sessionUpdate: "agent_message_chunk", content: { type: "text", text } })

  const reapplyMode = Effect.gen(function*() {
    const current = yield* SubscriptionRef.get(mode)
    if (current === Modes.initialMode || current === "bypassPermissions") return
    yield* compactable.current.pipe(Effect.flatMap((s) => s.setPermissionMode(current)), Effect.ignore)
  })

  const compact = (trigger: "manual" | "auto", instructions: string | undefined) =>
    Effect.gen(function*() {
      if (instructions !== undefined) {
        const turn = yield* Compaction.viaCli(compactable, { instructions })
        yield* say(turn.isError ? "The CLI could not compact the conversation." : "Compacted the conversation.")
        return
      }
      const outcome = yield* Compaction.run(compactable, { trigger })
      yield* reapplyMode
      yield* say(
        outcome._tag === "Compacted"
          ? `Compacted the conversation: about ${outcome.preTokens} tokens before, ${outcome.postTokens} after.`
          : `Nothing was compacted (${outcome.reason._tag}).`
      )
    }).pipe(
      Effect.provideService(Permissions.Permissions, permissions),
      Effect.catchAll((error) => Effect.fail(new SessionFailed({ sessionId: acpId, reason: `compaction failed: ${String(error)}` })))
    )

  /** Waits until the pump has sent the updates of `count` results, or a little longer than it should take. */
  const pumped = (count: number) =>
    resultsSent.changes.pipe(Stream.filter((n) => n >= count), Stream.runHead, Effect.timeout(pumpLag), Effect.ignore)

  const runTurn = (content: string | ReadonlyArray<Anthropic.ContentBlock>, mayCompact: boolean): Effect.Effect<Acp.StopReason, AcpError, Compaction.RunContext> =>
    Effect.gen(function*() {
      const signal = yield* Deferred.make<void>()
      yield* Ref.set(cancelled, Option.some(signal))
      const before = yield* SubscriptionRef.get(resultsSent)
      const turn = yield* compactable.send(content).pipe(Effect.mapError(turnFailed(acpId)))
      const result = turn.result.pipe(Effect.mapError(turnFailed(acpId)))
      const outcome = yield* Effect.raceFirst(Effect.asSome(result), Effect.as(Deferred.await(signal), Option.none()))
      if (Option.isNone(outcome)) {
        // The CLI is interrupted in the session's scope: the answer does not wait for it to confirm.
        yield* compactable.current.pipe(Effect.flatMap((s) => s.interrupt), Effect.ignore, Effect.forkIn(scope))
        yield* result.pipe(Effect.timeout(cancelAnswer), Effect.ignore)
        return "cancelled" as const
      }
      const summary = outcome.value
      yield* pumped(before + summary.results.length)
      if (mayCompact && !summary.interrupted && isTooLong(summary)) {
        yield* say("The conversation is too long for the model: compacting it, then going on.\n")
        yield* compact("auto", undefined)
        return yield* runTurn(content, false)
      }
      return stopReasonOf(summary)
    })

  const prompt: LiveSession["prompt"] = (blocks) =>
    busy.withPermitsIfAvailable(1)(
      Effect.gen(function*() {
        const command = Commands.compactCommand(PromptContent.textOf(blocks))
        if (command !== undefined && blocks.every((b) => b.type === "text")) {
          yield* compact("manual", command.instructions)
          return "end_turn" as const
        }
        return yield* runTurn(PromptContent.toUserContent(blocks), true)
      }).pipe(Effect.ensuring(Ref.set(cancelled, Option.none())))
    ).pipe(Effect.flatMap(Option.match({
      onNone: () => Effect.fail(new PromptInProgress({ sessionId: acpId })),
      onSome: Effect.succeed
    })))

  const cancel = Effect.gen(function*() {
    yield* SubscriptionRef.update(cancels, (n) => n + 1)
    const signal = yield* Ref.get(cancelled)
    if (Option.isSome(signal)) yield* Deferred.succeed(signal.value, undefined)
  })

  const setMode = (id: string) =>
    Effect.gen(function*() {
      if (!Modes.isMode(id)) return yield* new SessionFailed({ sessionId: acpId, reason: `no mode ${id}` })
      const session = yield* compactable.current
      if (id === "bypassPermissions") {
        // The CLI refuses this mode to root; the host then allows every ask itself.
        yield* session.setPermissionMode(id).pipe(Effect.ignore)
      } else {
        yield* session.setPermissionMode(id).pipe(
          Effect.mapError((e) => new SessionFailed({ sessionId: acpId, reason: `the CLI refused mode ${id}: ${e.message}` }))
        )
      }
      yield* SubscriptionRef.set(mode, id)
      yield* update({ sessionUpdate: "current_mode_update", currentModeId: id })
    })

  return {
    acpId,
    cwd: options.session.cwd,
    prompt,
    cancel,
    setMode,
    mode: SubscriptionRef.get(mode)
  } satisfies LiveSession
})

export type StartContext = Effect.Effect.Context<ReturnType<typeof start>>
