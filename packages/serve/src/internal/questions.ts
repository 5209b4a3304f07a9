/**
 * Questions the CLI asks through its `AskUserQuestion` tool. The CLI sends
 * them as a `can_use_tool` and waits, like a permission; the answer is an
 * allow whose `updatedInput` carries `answers` (question text → the chosen
 * labels), which is how the CLI's own SDK answers it. A pending question is
 * listed (`GET /question`), answered or rejected once, and denied with the
 * reason when no client answers in time, as permission asks are.
 *
 * MCP elicitations are not served: the session declines them (its default),
 * so they never wait on a client.
 */
import type { Canonical } from "@skein/protocol"
import { Permissions } from "@skein/session"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import { QuestionNotFound } from "../ServeError.js"

export type Answer =
  | { readonly _tag: "Answered"; readonly answers: ReadonlyArray<ReadonlyArray<string>> }
  | { readonly _tag: "Rejected"; readonly reason: string }

export interface Pending {
  readonly directory: string
  readonly request: Canonical.QuestionRequest
}

interface Entry {
  readonly key: string
  readonly answer: Deferred.Deferred<Answer>
  announced: Pending | undefined
}

export interface Questions {
  /** The CLI's side: waits for an answer, a rejection or the timeout. */
  readonly ask: (
    cliSessionId: string,
    request: Permissions.PermissionRequest,
    onResolved: (answer: Answer) => Effect.Effect<void>
  ) => Effect.Effect<Permissions.PermissionDecision>
  /** The translator named the question (`que_` id): it is now listed and can be answered. */
  readonly announce: (cliSessionId: string, requestId: string, directory: string, request: Canonical.QuestionRequest) => Effect.Effect<void>
  readonly pending: (directory?: string) => Effect.Effect<ReadonlyArray<Pending>>
  readonly answer: (id: string, answer: Answer) => Effect.Effect<void, QuestionNotFound>
}

export const isQuestion = (request: Permissions.PermissionRequest): boolean => request.toolName === "AskUserQuestion"

/** The tool's input with `answers` keyed by question text, labels joined as the CLI's own picker joins them. */
export const updatedInput = (input: { readonly [key: string]: unknown }, answers: ReadonlyArray<ReadonlyArray<string>>) => {
  const questions = Array.isArray(input["questions"]) ? input["questions"] : []
  const keyed: Record<string, string> = {}
  questions.forEach((q: unknown, i) => {
    const text = typeof q === "object" && q !== null && "question" in q ? String(q.question) : `question ${i + 1}`
    keyed[text] = (answers[i] ?? []).join(", ")
  })
  return { ...input, answers: keyed }
}

export const make = (timeout: Duration.DurationInput): Questions => {
  const entries = new Map<string, Entry>()
  const byId = new Map<string, string>()
  const keyOf = (cliSessionId: string, requestId: string) => `${cliSessionId}/${requestId}`
  const entryFor = (key: string) => {
    const existing = entries.get(key)
    if (existing !== undefined) return existing
    const entry: Entry = { key, answer: Deferred.unsafeMake<Answer>(FiberId.none), announced: undefined }
    entries.set(key, entry)
    return entry
  }
  const remove = (entry: Entry) => {
    entries.delete(entry.key)
    if (entry.announced !== undefined) byId.delete(entry.announced.request.id)
  }
  const reason = `no client answered within ${Duration.format(timeout)}: the question was withdrawn by the server's policy`

  return {
    ask: (cliSessionId, request, onResolved) =>
      Effect.gen(function*() {
        const entry = yield* Effect.sync(() => entryFor(keyOf(cliSessionId, request.requestId)))
        const answer = yield* Deferred.await(entry.answer).pipe(
          Effect.timeoutTo({ duration: timeout, onSuccess: (a) => a, onTimeout: (): Answer => ({ _tag: "Rejected", reason }) }),
          // Also when the session stops while the question is pending: it is no longer listed.
          Effect.ensuring(Effect.sync(() => remove(entry)))
        )
        yield* onResolved(answer)
        return answer._tag === "Answered"
          ? Permissions.allow({ updatedInput: updatedInput(request.input, answer.answers) })
          : Permissions.deny(answer.reason)
      }).pipe(Effect.withSpan("Questions.ask")),
    announce: (cliSessionId, requestId, directory, request) =>
      Effect.sync(() => {
        const entry = entryFor(keyOf(cliSessionId, requestId))
        entry.announced = { directory, request }
        byId.set(request.id, entry.key)
      }),
    pending: (directory) =>
      Effect.sync(() =>
        [...entries.values()].flatMap((e) =>
          e.announced !== undefined && (directory === undefined || e.announced.directory === directory) ? [e.announced] : []
        )
      ),
    answer: (id, answer) =>
      Effect.gen(function*() {
        const key = byId.get(id)
        const entry = key === undefined ? undefined : entries.get(key)
        if (entry === undefined) return yield* new QuestionNotFound({ requestID: id })
        byId.delete(id)
        entry.announced = undefined
        if (!(yield* Deferred.succeed(entry.answer, answer))) return yield* new QuestionNotFound({ requestID: id })
      })
  }
}
