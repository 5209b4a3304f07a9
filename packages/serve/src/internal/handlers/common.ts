/**
 * What every handler group shares: the registry's failures as opencode's
 * error bodies, and request bodies decoded by their schema so that a bad one
 * answers 400 with the schema's own message.
 */
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as Api from "../../ServeApi.js"
import type { ServeError } from "../../ServeError.js"
import { isTooLarge, limitOf, tooLargeMessage } from "../bodyLimit.js"

export type WireError = Api.BadRequest | Api.NotFoundError | Api.DirectoryRejected | Api.UnknownError

export const wire = (e: ServeError): WireError => {
  switch (e._tag) {
    case "SessionNotFound":
    case "MessageNotFound":
    case "PermissionNotFound":
    case "QuestionNotFound":
      return Api.notFound(e.message)
    case "DirectoryRejected":
      return new Api.DirectoryRejected({ data: { message: e.message } })
    case "SessionFailed":
      return new Api.UnknownError({ data: { message: e.message } })
  }
}

/** The registry's failures as the API's. */
export const orWire = <A, R>(effect: Effect.Effect<A, ServeError, R>): Effect.Effect<A, WireError, R> => Effect.mapError(effect, wire)

/**
 * The body decoded by `schema`. HttpApi's own payload decoding answers with
 * its `HttpApiDecodeError` body; opencode's clients read `{name, data}`, so
 * the handlers decode the body themselves (the endpoint still declares the
 * payload, for the OpenAPI document). An empty body is `empty` when given.
 */
export const decodeBody = <A, I>(schema: Schema.Schema<A, I>, empty?: I) => (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    const text = yield* Effect.mapError(request.text, (e): Api.BadRequest | Api.PayloadTooLarge =>
      isTooLarge(e)
        ? new Api.PayloadTooLarge({ data: { message: tooLargeMessage(limitOf(request)) } })
        : Api.badRequest("the body could not be read"))
    const json = text.trim() === "" && empty !== undefined
      ? empty
      : yield* Effect.try({ try: (): unknown => JSON.parse(text), catch: () => Api.badRequest("the body is not JSON") })
    return yield* Schema.decodeUnknown(schema)(json).pipe(
      Effect.mapError((e) => Api.badRequest(ParseResult.TreeFormatter.formatErrorSync(e)))
    )
  })
