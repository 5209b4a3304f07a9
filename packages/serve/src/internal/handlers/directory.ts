/**
 * The API's `DirectoryGuard`: every route's `directory` resolved and
 * confined to the roots (403 otherwise) before its handler runs.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { DirectoryGuard, DirectoryRejected } from "../../ServeApi.js"
import { directoryOf } from "../http.js"

export const layer = (roots: ReadonlyArray<string>) =>
  Layer.effect(
    DirectoryGuard,
    Effect.map(FileSystem.FileSystem, (fs) =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => directoryOf(request, roots)).pipe(
        Effect.mapError((e) => new DirectoryRejected({ data: { message: e.message } })),
        Effect.provideService(FileSystem.FileSystem, fs)
      ))
  )
