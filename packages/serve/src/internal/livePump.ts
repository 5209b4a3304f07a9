/**
 * The pump of one served session: the one writer of its translator state.
 * It turns each batch of the inbox (CLI events, the host's inputs, the host's
 * own events) into canonical events, in one order, publishes them, and keeps
 * what the session shows live (the turn's messages, busy, finished turns).
 */
import type { Canonical } from "@skein/protocol"
import type { EventLog } from "@skein/store"
import * as Effect from "effect/Effect"
import * as SubscriptionRef from "effect/SubscriptionRef"
import { EventTranslator, History, TurnBoundaries } from "@skein/canonical"
import type * as PermissionBroker from "../PermissionBroker.js"
import type { ServerEvents } from "../ServerEvents.js"
import type * as Questions from "./questions.js"
import type * as StoredSession from "./storedSession.js"

export type CliInput = Extract<EventTranslator.Input, { readonly _tag: "Cli" }>

/** One entry of the session's inbox. */
export type Item =
  | { readonly _tag: "Event"; readonly event: CliInput }
  | { readonly _tag: "Input"; readonly input: EventTranslator.Input }
  /** An event of the host's own (a turn the CLI could not finish), in its place among the others. */
  | { readonly _tag: "Host"; readonly event: Canonical.CanonicalEvent }

export interface Ended {
  /** How many turns have reached `session.idle`. */
  readonly count: number
  /** The messages of the last finished turn (from its prompt on), as a client holds them. */
  readonly messages: ReadonlyArray<History.WithParts>
}

export interface Options {
  readonly directory: string
  readonly cliSessionId: string
  readonly initial: EventTranslator.State
  readonly events: ServerEvents["Type"]
  readonly broker: PermissionBroker.PermissionBroker["Type"]
  readonly questions: Questions.Questions
  readonly stored: StoredSession.StoredSession | undefined
  readonly ended: SubscriptionRef.SubscriptionRef<Ended>
  readonly busy: SubscriptionRef.SubscriptionRef<boolean>
}

export interface LivePump {
  /** Translates, publishes and follows one batch of the inbox. */
  readonly pumpBatch: (items: Iterable<Item>) => Effect.Effect<void, EventLog.EventLogError>
  /** The translator's state now. */
  readonly translator: () => EventTranslator.State
  /** This turn's and the last turn's messages, as shown live. */
  readonly shown: () => ReadonlyArray<History.WithParts>
}

/** Where the turn's end is reported: the first idle status (or `session.idle`) of a batch; -1 when none. */
export const turnEndIn = (events: ReadonlyArray<Canonical.CanonicalEvent>) =>
  events.findIndex((e) => e.type === "session.idle" || (e.type === "session.status" && e.properties.status.type === "idle"))

/** Starts before the message that starts the turn, ends after the one that ends it. */
export const withBoundaries = (
  turns: TurnBoundaries.State,
  cli: CliInput
): readonly [TurnBoundaries.State, ReadonlyArray<EventTranslator.Input>] => {
  if (cli.event._tag !== "Message") return [turns, [cli]]
  const [next, outputs] = TurnBoundaries.step(turns, cli.event.message)
  const before: Array<EventTranslator.Input> = []
  const after: Array<EventTranslator.Input> = []
  for (const output of outputs) {
    if (output._tag === "TurnStarted") before.push({ _tag: "TurnStarted", turn: output.turn, origin: output.origin })
    else after.push({ _tag: "TurnEnded", turn: output.turn, interrupted: output.interrupted })
  }
  return [next, [...before, cli, ...after]]
}

const requestIdOf = (state: EventTranslator.State, id: string): string | undefined => {
  for (const [requestId, request] of state.requests) if (request.id === id) return requestId
  return undefined
}

export const make = (options: Options): LivePump => {
  const { stored } = options
  let translator = options.initial
  let turns = TurnBoundaries.initial()
  // The turn under way (from its prompt on) and the one before it: after an
  // idle the transcript may still lag the last turn by a write.
  let shownBefore = History.folding()
  let shownNow = History.folding()

  /**
   * A new ask or question is listed where clients look for it (and, with a
   * store, is a row until it is answered). Like `follow`, an effect only
   * where there is something to do: most events of a storm are deltas,
   * which run none.
   */
  const announce = (event: Canonical.CanonicalEvent): Effect.Effect<void> | undefined => {
    const asked = event.type === "permission.asked" || event.type === "question.asked"
    const requestId = asked ? requestIdOf(translator, event.properties.id) : undefined
    const recorded = stored?.record(event, requestId)
    if (!asked || requestId === undefined) return recorded
    const listed = event.type === "permission.asked"
      ? options.broker.announce(options.cliSessionId, requestId, options.directory, event.properties)
      : options.questions.announce(options.cliSessionId, requestId, options.directory, event.properties)
    return recorded === undefined ? listed : Effect.zipRight(recorded, listed)
  }

  /** The turn's messages, folded as a client folds them: what the list shows beside the transcript, and what the sync prompt answers with. */
  const follow = (event: Canonical.CanonicalEvent): Effect.Effect<void> | undefined => {
    switch (event.type) {
      case "session.status": {
        const isBusy = event.properties.status.type !== "idle"
        return SubscriptionRef.set(options.busy, isBusy)
      }
      case "session.idle": {
        const messages = shownNow.messages()
        shownBefore = shownNow
        shownNow = History.folding()
        return SubscriptionRef.update(options.ended, (e) => ({ count: e.count + 1, messages }))
      }
      default:
        // The other session.* events (and the legacy copies) are not part of a message.
        if (!event.type.startsWith("session.")) shownNow.add(event)
        return undefined
    }
  }

  /** The item's canonical events, appended to `out`; the announcements they need, to `effects`. */
  const translate = (item: Item, out: Array<Canonical.CanonicalEvent>, effects: Array<Effect.Effect<void>>) => {
    if (item._tag === "Host") {
      out.push(item.event)
      return
    }
    let inputs: ReadonlyArray<EventTranslator.Input>
    if (item._tag === "Event") [turns, inputs] = withBoundaries(turns, item.event)
    else inputs = [item.input]
    for (const input of inputs) {
      const [next, events] = EventTranslator.step(translator, input)
      translator = next
      for (const event of events) {
        out.push(event)
        const announcing = announce(event)
        if (announcing !== undefined) effects.push(announcing)
      }
    }
  }

  const pumpBatch = (items: Iterable<Item>) =>
    Effect.gen(function*() {
      const out: Array<Canonical.CanonicalEvent> = []
      const effects: Array<Effect.Effect<void>> = []
      for (const item of items) {
        translate(item, out, effects)
        // Before the next item, as each event's announcement ran in its place.
        for (const effect of effects) yield* effect
        effects.length = 0
      }
      // With a store, the transcript is mirrored before the turn's end goes out: a client told
      // the turn ended can continue the session on any machine.
      const end = stored === undefined ? -1 : turnEndIn(out)
      if (stored !== undefined && end !== -1) {
        const error = yield* stored.beforeTurnEnd
        if (error !== undefined) out.splice(end, 0, error)
      }
      yield* (stored === undefined ? options.events.publish(options.directory, out) : stored.publish(out))
      for (const event of out) {
        const following = follow(event)
        if (following !== undefined) yield* following
      }
    })

  return {
    pumpBatch,
    translator: () => translator,
    shown: () => History.withShown(shownBefore.messages(), shownNow.messages())
  }
}
