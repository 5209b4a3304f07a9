/**
 * However a session's inbox is cut into the pump's batches (`liveSession`
 * bounds them, and a storm fills each to the bound), the pump publishes the
 * same canonical events in the same order and ends the same turns: the batch
 * size decides when a batch's frames go out, never what they carry.
 */
import { describe, expect, it } from "@effect/vitest"
import { EventTranslator } from "@skein/canonical"
import type { Canonical } from "@skein/protocol"
import { CliMessage, Lenient } from "@skein/protocol"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as PermissionBroker from "../src/PermissionBroker.js"
import { ServerEvents } from "../src/ServerEvents.js"
import * as LivePump from "../src/internal/livePump.js"
import * as Questions from "../src/internal/questions.js"

const fixtures = Path.join(import.meta.dirname, "../../protocol/test/fixtures")
const captures = ["permission.ndjson", "two-tools.ndjson", "text-thinking.ndjson", "interrupt.ndjson"]

/** One capture's stdout as the pump's inbox items, in order. */
const inboxOf = (file: string) => {
  const decoded = Lenient.decodeAll(CliMessage.decoder, new Uint8Array(Fs.readFileSync(Path.join(fixtures, file))))
  const items = decoded.map((event, i): LivePump.Item => ({ _tag: "Event", event: { _tag: "Cli", event, receivedAt: 1_700_000_000_000 + i } }))
  return { items, cliSessionId: EventTranslator.cliSessionIdOf(decoded) ?? "" }
}

/** A log that only keeps what is published, in order. */
const recording = (published: Array<Canonical.CanonicalEvent>): ServerEvents["Type"] =>
  ServerEvents.of({
    publish: (_directory, events) =>
      Effect.sync(() => {
        published.push(...events)
        return []
      }),
    follow: () => Stream.empty,
    nextSeq: Effect.succeed(1),
    epoch: "e",
    published: () => Effect.succeed({ next: 1, count: 0 }),
    firstSeq: Effect.succeed(1),
    track: () => Effect.void,
    delivered: () => Effect.void,
    live: { tryAttach: () => undefined }
  })

/** The pump over `items` in batches of the sizes in `cuts` (cycled): what it published, the turns it ended, whether it is busy. */
const pumped = (inbox: ReturnType<typeof inboxOf>, cuts: ReadonlyArray<number>) =>
  Effect.gen(function*() {
    const published: Array<Canonical.CanonicalEvent> = []
    const ended = yield* SubscriptionRef.make<LivePump.Ended>({ count: 0, messages: [] })
    const busy = yield* SubscriptionRef.make(false)
    const pump = LivePump.make({
      directory: "/work",
      cliSessionId: inbox.cliSessionId,
      initial: EventTranslator.initial({ cliSessionId: inbox.cliSessionId, legacy: true }),
      events: recording(published),
      broker: yield* PermissionBroker.make(),
      questions: Questions.make("1 minute"),
      stored: undefined,
      ended,
      busy
    })
    let at = 0
    for (let i = 0; at < inbox.items.length; i++) {
      const size = cuts[i % cuts.length]!
      yield* pump.pumpBatch(inbox.items.slice(at, at + size))
      at += size
    }
    return { published, turns: (yield* SubscriptionRef.get(ended)).count, busy: yield* SubscriptionRef.get(busy), shown: pump.shown() }
  })

describe("the pump's batches", () => {
  for (const capture of captures) {
    it(`${capture}: any cut of the inbox publishes the same events and ends the same turns as one batch`, () => {
      const inbox = inboxOf(capture)
      const whole = Effect.runSync(Effect.scoped(pumped(inbox, [inbox.items.length])))
      expect(whole.published.length).toBeGreaterThan(0)
      expect(whole.turns).toBeGreaterThan(0)
      FastCheck.assert(
        FastCheck.property(FastCheck.array(FastCheck.integer({ min: 1, max: 24 }), { minLength: 1, maxLength: 6 }), (cuts) => {
          expect(Effect.runSync(Effect.scoped(pumped(inbox, cuts)))).toEqual(whole)
        }),
        { numRuns: 40 }
      )
    })
  }
})
