/**
 * Asks the CLI waits on while any client may answer: permissions and
 * questions. An ask is keyed by the CLI's request id, listed once the
 * translator has named it, answered once (a later answer finds nothing), and
 * settled by the policy's answer when no client answers in time. However the
 * wait ends (an answer, the policy, the session stopping), the ask leaves the
 * list.
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"

export interface Pending<Request> {
  readonly directory: string
  readonly request: Request
}

export interface PendingAsks<Request extends { readonly id: string }, Answer> {
  /** The CLI's side: the first client answer, or the policy's after the timeout. */
  readonly wait: (cliSessionId: string, requestId: string) => Effect.Effect<Answer>
  /** Lists the ask under the client-facing id of `request`. */
  readonly announce: (cliSessionId: string, requestId: string, directory: string, request: Request) => Effect.Effect<void>
  readonly withdraw: (cliSessionId: string, requestId: string) => Effect.Effect<void>
  readonly pending: (directory?: string) => Effect.Effect<ReadonlyArray<Pending<Request>>>
  /** False when no such ask is listed, or another answer came first. */
  readonly answer: (id: string, answer: Answer) => Effect.Effect<boolean>
}

interface Entry<Request, Answer> {
  readonly key: string
  readonly answer: Deferred.Deferred<Answer>
  announced: Pending<Request> | undefined
}

export const make = <Request extends { readonly id: string }, Answer>(
  timeout: Duration.Duration,
  policy: () => Answer
): PendingAsks<Request, Answer> => {
  const entries = new Map<string, Entry<Request, Answer>>()
  const byId = new Map<string, string>()
  const keyOf = (cliSessionId: string, requestId: string) => `${cliSessionId}/${requestId}`
  // The translator may name an ask before or after the CLI's side waits on it.
  const entryFor = (key: string) => {
    const existing = entries.get(key)
    if (existing !== undefined) return existing
    const entry: Entry<Request, Answer> = { key, answer: Deferred.unsafeMake<Answer>(FiberId.none), announced: undefined }
    entries.set(key, entry)
    return entry
  }
  const remove = (entry: Entry<Request, Answer>) => {
    entries.delete(entry.key)
    if (entry.announced !== undefined) byId.delete(entry.announced.request.id)
  }

  return {
    wait: (cliSessionId, requestId) =>
      Effect.suspend(() => {
        const entry = entryFor(keyOf(cliSessionId, requestId))
        return Deferred.await(entry.answer).pipe(
          Effect.timeoutTo({ duration: timeout, onSuccess: (answer) => answer, onTimeout: policy }),
          Effect.ensuring(Effect.sync(() => remove(entry)))
        )
      }),
    announce: (cliSessionId, requestId, directory, request) =>
      Effect.sync(() => {
        const entry = entryFor(keyOf(cliSessionId, requestId))
        entry.announced = { directory, request }
        byId.set(request.id, entry.key)
      }),
    withdraw: (cliSessionId, requestId) =>
      Effect.sync(() => {
        const entry = entries.get(keyOf(cliSessionId, requestId))
        if (entry !== undefined) remove(entry)
      }),
    pending: (directory) =>
      Effect.sync(() =>
        [...entries.values()].flatMap((e) =>
          e.announced !== undefined && (directory === undefined || e.announced.directory === directory) ? [e.announced] : []
        )
      ),
    answer: (id, answer) =>
      Effect.suspend(() => {
        const key = byId.get(id)
        const entry = key === undefined ? undefined : entries.get(key)
        if (entry === undefined) return Effect.succeed(false)
        byId.delete(id)
        entry.announced = undefined
        // Only the first answer counts; the waiting side removes the entry.
        return Deferred.succeed(entry.answer, answer)
      })
  }
}
