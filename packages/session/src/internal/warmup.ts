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
import { Chunk, Duration, Effect } from "effect"
import type * as Launch from "./launch.js"
import * as StdoutPull from "./stdoutPull.js"

type Decoded = StdoutPull.Decoded

let counter = 0

const answerId = (event: Decoded): string | undefined =>
  event._tag === "Message" && event.message.type === "control_response" ? event.message.response.request_id : undefined

/** How long the whole warm-up may take before the process is held as it is. */
export const defaultTimeout = Duration.seconds(5)

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
  Effect.suspend(() => {
    if (requests.length === 0) return Effect.succeed(launched)
    const kept: Array<Decoded> = []
    let ended = false
    /** Reads until `id` is answered; false when stdout ended first. */
    const untilAnswered = (id: string): Effect.Effect<boolean> =>
      launched.stdout.pipe(
        Effect.flatMap((chunk) => {
          let answered = false
          for (const event of chunk) {
            if (answerId(event) === id) answered = true
            else kept.push(event)
          }
          return answered ? Effect.succeed(true) : untilAnswered(id)
        }),
        Effect.catchAll(() => Effect.sync(() => (ended = true, false)))
      )
    const one = (request: Control.HostRequestPayload) =>
      Effect.suspend(() => {
        if (ended) return Effect.void
        const id = `warm_${++counter}`
        // A write that finds stdin closed means the CLI is gone: the read then ends.
        return Effect.zipRight(
          Effect.ignore(launched.child.write(HostMessage.encode(Control.request(id, request)))),
          untilAnswered(id)
        )
      })
    return Effect.forEach(requests, one, { discard: true }).pipe(
      Effect.timeoutOption(timeout),
      Effect.map((): Launch.Launched => ({
        ...launched,
        // Once stdout ended, `launched.stdout` keeps saying so.
        stdout: StdoutPull.prefixed(Chunk.unsafeFromArray(kept), launched.stdout)
      })),
      Effect.withSpan("SessionPool.warmup", { attributes: { requests: requests.map((r) => r.subtype).join(",") } })
    )
  })
