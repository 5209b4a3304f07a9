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
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { QuestionNotFound } from "../ServeError.js"
import * as PendingAsks from "./pendingAsks.js"

export type Answer =
  | { readonly _tag: "Answered"; readonly answers: ReadonlyArray<ReadonlyArray<string>> }
  | { readonly _tag: "Rejected"; readonly reason: string }

export type Pending = PendingAsks.Pending<Canonical.QuestionRequest>

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
  const reason = `no client answered within ${Duration.format(timeout)}: the question was withdrawn by the server's policy`
  const asks = PendingAsks.make<Canonical.QuestionRequest, Answer>(Duration.decode(timeout), () => ({ _tag: "Rejected", reason }))
  return {
    ask: (cliSessionId, request, onResolved) =>
      asks.wait(cliSessionId, request.requestId).pipe(
        Effect.tap(onResolved),
        Effect.map((answer) =>
          answer._tag === "Answered"
            ? Permissions.allow({ updatedInput: updatedInput(request.input, answer.answers) })
            : Permissions.deny(answer.reason)
        ),
        Effect.withSpan("Questions.ask")
      ),
    announce: asks.announce,
    pending: asks.pending,
    answer: (id, answer) =>
      Effect.flatMap(asks.answer(id, answer), (first) => first ? Effect.void : Effect.fail(new QuestionNotFound({ requestID: id })))
  }
}
