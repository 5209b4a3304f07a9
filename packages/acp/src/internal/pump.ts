/**
 * The one reader of a session's CLI events: the canonical translator runs
 * over them (turn boundaries included, `EventTranslator.withTurns`) and
 * each canonical event goes to the client as what `Updates` makes of it, in
 * order. The CLI's `init` names the session, lists its commands and reports
 * the mode the user's settings chose (a `status` reports a mode the CLI
 * changed by itself); each `result` is counted once its
 * updates are sent, so a prompt can answer after them.
 */
import type * as Acp from "@agentclientprotocol/sdk/unstable"
import { EventTranslator } from "@skein/canonical"
import type { CliMessage } from "@skein/protocol"
import type { Turn } from "@skein/session"
import * as Effect from "effect/Effect"
import type * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as Updates from "../Updates.js"
import * as Commands from "./commands.js"
import * as Modes from "./modes.js"

export interface Options {
  readonly acpId: string
  readonly events: Effect.Effect<Queue.Dequeue<Turn.SessionEvent>, never, Scope.Scope>
  readonly update: (update: Acp.SessionUpdate) => Effect.Effect<void>
  readonly mode: SubscriptionRef.SubscriptionRef<string>
  readonly resultsSent: SubscriptionRef.SubscriptionRef<number>
  readonly translator: EventTranslator.State
  readonly contextWindow?: number | undefined
  readonly onCliSessionId?: ((cliSessionId: string) => Effect.Effect<void>) | undefined
}

/** Subscribes now (nothing after this call is missed) and pumps in a fiber of the current scope. */
export const run = (options: Options) =>
  Effect.gen(function*() {
    const { mode, update } = options
    const mapper = Updates.make({ users: false, contextWindow: options.contextWindow })
    let translator = options.translator
    let commands = ""
    let named = false

    const onInit = (init: CliMessage.Init) =>
      Effect.gen(function*() {
        if (!named) {
          named = true
          if (options.onCliSessionId !== undefined) yield* options.onCliSessionId(init.session_id)
        }
        const available = Commands.fromInit(init)
        const key = JSON.stringify(available)
        if (key !== commands) {
          commands = key
          yield* update({ sessionUpdate: "available_commands_update", availableCommands: available })
        }
        // The user's settings may start the CLI in another mode.
        yield* modeReported(init.permissionMode)
      })

    /** The CLI says which mode it is in (at `init`, and in `status` when it changes one itself, as leaving plan mode does). */
    const modeReported = (reported: string | undefined) =>
      Effect.gen(function*() {
        const current = yield* SubscriptionRef.get(mode)
        // A host-kept bypass stays as it is: the CLI may run in `default` beneath it.
        if (reported === undefined || !Modes.isMode(reported) || reported === current || current === "bypassPermissions") return
        yield* SubscriptionRef.set(mode, reported)
        yield* update({ sessionUpdate: "current_mode_update", currentModeId: reported })
      })

    const pumpOne = (input: EventTranslator.Input) =>
      Effect.gen(function*() {
        const message = input._tag === "Cli" && input.event._tag === "Message" ? input.event.message : undefined
        if (message?.type === "system" && message.subtype === "init") yield* onInit(message)
        if (message?.type === "system" && message.subtype === "status") yield* modeReported(message.permissionMode)
        const [next, events] = EventTranslator.step(translator, input)
        translator = next
        for (const event of events) {
          for (const u of mapper.map(event)) yield* update(u)
        }
        if (message?.type === "result") yield* SubscriptionRef.update(options.resultsSent, (n) => n + 1)
      })

    const bus = yield* options.events
    yield* Stream.fromQueue(bus).pipe(EventTranslator.withTurns, Stream.runForEach(pumpOne), Effect.forkScoped)
  })
