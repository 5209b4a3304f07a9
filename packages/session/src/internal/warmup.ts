/**
 * Warming a held process: control requests the pool sends after
 * `initialize`, so that the CLI runs code its first turn would otherwise run
 * after the first user message, with no model request and nothing written to
 * the conversation.
 *
 * Each request is written and its answer awaited, one after the other (the
 * CLI handles them in order anyway). An answer that is an error (an older
 * release that does not know the subtype) is fine: the request only warms.
 * The answers are the pool's own and are dropped; every other line read
 * meanwhile stays first in `stdout`, so the session sees and records it.
 * The whole warm-up is bounded: a CLI that does not answer is handed over
 * as it is, and a late answer is one the session ignores (no one waits for
 * its id).
 */
import { Control, HostMessage } from "@skein/protocol"
import { Chunk, Duration, Effect, Option } from "effect"
import type * as Launch from "./launch.js"
import * as StdoutPull from "./stdoutPull.js"

type Decoded = StdoutPull.Decoded

let counter = 0

/** A fresh request id of the pool's own; `prefix` says what it was for. */
export const requestId = (prefix: string): string => `${prefix}_${++counter}`

const answerOf = (event: Decoded): Control.ControlResponse | undefined =>
  event._tag === "Message" && event.message.type === "control_response" ? event.message : undefined

/** How long the whole warm-up may take before the process is held as it is. */
export const defaultTimeout = Duration.seconds(5)

/** A request already encoded as its line, with its id: the pool also sends requests the protocol does not model. */
export interface Outgoing {
  readonly id: string
  readonly line: string
}

/**
 * Writes each request in turn and reads stdout until it is answered (or
 * stdout ends, or `timeout` passes). Returns the answers, in the order of
 * `requests` (none for one not answered), and the process with what was read,
 * minus the answers, first in `stdout`.
 */
export const exchange = (
  launched: Launch.Launched,
  requests: ReadonlyArray<Outgoing>,
  timeout: Duration.DurationInput = defaultTimeout
): Effect.Effect<readonly [ReadonlyArray<Option.Option<Control.ControlResponse>>, Launch.Launched]> =>
  Effect.suspend(() => {
    const kept: Array<Decoded> = []
    const answers = new Map<string, Control.ControlResponse>()
    let ended = false
    /** Reads until `id` is answered, or stdout ends. */
    const untilAnswered = (id: string): Effect.Effect<void> =>
      launched.stdout.pipe(
        Effect.flatMap((chunk) => {
          for (const event of chunk) {
            const answer = answerOf(event)
            if (answer !== undefined && requests.some((r) => r.id === answer.response.request_id)) {
              answers.set(answer.response.request_id, answer)
            } else kept.push(event)
          }
          return answers.has(id) ? Effect.void : untilAnswered(id)
        }),
        Effect.catchAll(() => Effect.sync(() => (ended = true)))
      )
    const one = (request: Outgoing) =>
      Effect.suspend(() =>
        ended
          ? Effect.void
          // A write that finds stdin closed means the CLI is gone: the read then ends.
          : Effect.zipRight(Effect.ignore(launched.child.write(request.line)), untilAnswered(request.id))
      )
    return Effect.forEach(requests, one, { discard: true }).pipe(
      Effect.timeoutOption(timeout),
      Effect.map(() =>
        [
          requests.map((r) => Option.fromNullable(answers.get(r.id))),
          // Once stdout ended, `launched.stdout` keeps saying so.
          { ...launched, stdout: StdoutPull.prefixed(Chunk.unsafeFromArray(kept), launched.stdout) }
        ] as const
      )
    )
  })

/**
 * Sends `requests` to a launched process and reads its stdout until each is
 * answered (or stdout ends, or `timeout` passes); returns the process with
 * what was read, minus the answers, first in `stdout`.
 */
export const run = (
  launched: Launch.Launched,
  requests: ReadonlyArray<Control.HostRequestPayload>,
  timeout: Duration.DurationInput = defaultTimeout
): Effect.Effect<Launch.Launched> =>
  requests.length === 0 ? Effect.succeed(launched) : exchange(
    launched,
    requests.map((request) => {
      const id = requestId("warm")
      return { id, line: HostMessage.encode(Control.request(id, request)) }
    }),
    timeout
  ).pipe(
    Effect.map(([, warmed]) => warmed),
    Effect.withSpan("SessionPool.warmup", { attributes: { requests: requests.map((r) => r.subtype).join(",") } })
  )
