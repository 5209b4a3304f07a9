/**
 * Finding a stored session for a command: the config root (`--root`, else
 * CLAUDE_CONFIG_DIR, else ~/.claude) and a session in it by id, title or path.
 */
import { Options } from "@effect/cli"
import * as FileSystem from "@effect/platform/FileSystem"
import type { Branch, ResumeLoader } from "@skein/store"
import { SessionIndex, TranscriptLayout } from "@skein/store"
import { Effect, Layer, Option } from "effect"
import * as Path from "node:path"
import { type CliError, fail } from "../CliError.js"

export const rootOption = Options.directory("root").pipe(
  Options.withDescription("the Claude config folder (default: CLAUDE_CONFIG_DIR, else ~/.claude)"),
  Options.optional
)

export const rootOf = (option: Option.Option<string>) =>
  Option.match(option, {
    onSome: (r) => Effect.succeed(Path.resolve(r)),
    onNone: () => Effect.orDie(TranscriptLayout.rootConfig)
  })

/** Runs `effect` with a session index over the chosen root. */
export const withIndex = <A, E, R>(option: Option.Option<string>, effect: (root: string) => Effect.Effect<A, E, R>) =>
  Effect.flatMap(rootOf(option), (r) => effect(r).pipe(Effect.provide(SessionIndex.layer.pipe(Layer.provide(TranscriptLayout.layer(r))))))

/** One line for each failure of the store a person can act on. */
export const describe = (error: ResumeLoader.LoadError | Branch.BranchWriteError | SessionIndex.SessionIndexError): CliError => {
  switch (error._tag) {
    case "ResumeAtNotFound":
      return fail(`message ${error.uuid} is not in the session's effective conversation`)
    case "TranscriptNotFound":
      return fail(`no such transcript: ${error.path}`)
    case "TranscriptReadError":
    case "BranchWriteError":
    case "SessionIndexError":
      return fail(`${error.path}: ${error.message}`)
  }
}

/** An existing transcript file, else an id, path or title the index knows: the transcript's path. */
export const resolve = (query: string, root: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const info = yield* Effect.option(fs.stat(query))
    if (Option.isSome(info) && info.value.type === "File") return Path.resolve(query)
    const index = yield* SessionIndex.SessionIndex
    const found = yield* index.resolve(query).pipe(Effect.mapError(describe))
    if (Option.isSome(found)) return found.value.path
    return yield* fail(`no session matches ${JSON.stringify(query)} under ${root} (an id, a title or a path)`)
  })

/** The session a transcript holds, and the folder its CLI ran in. */
export const sessionOfFile = (path: string) =>
  Effect.gen(function*() {
    const sessionId = Option.getOrElse(TranscriptLayout.sessionIdOfFile(Path.basename(path)), () => Path.basename(path, ".jsonl"))
    const cwd = yield* TranscriptLayout.recordedCwd(path).pipe(Effect.mapError((e) => fail(`${path}: ${e.message}`)))
    if (Option.isNone(cwd)) return yield* fail(`${path} records no working folder`)
    return { sessionId, cwd: cwd.value }
  })
