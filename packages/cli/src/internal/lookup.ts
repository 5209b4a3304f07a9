/**
 * Finding a stored session for a command: the config root (`--root`, else
 * CLAUDE_CONFIG_DIR, else ~/.claude) and a session in it by id, title or path.
 */
import { Options } from "@effect/cli"
import * as FileSystem from "@effect/platform/FileSystem"
import type { Branch } from "@skein/store"
import { ResumeLoader, SessionIndex, TranscriptLayout } from "@skein/store"
import { Effect, Layer, Option } from "effect"
import * as Path from "node:path"
import { type CliError, fail } from "../CliError.js"

export const rootOption = Options.directory("root").pipe(
  Options.withDescription("the Claude config folder (default: CLAUDE_CONFIG_DIR, else ~/.claude)"),
  Options.optional
)

/**
 * A `--root` that names an existing folder, resolved. A missing one is an
 * error, never an empty listing, and never created behind the person's back.
 */
export const existingRoot = (dir: string): Effect.Effect<string, CliError, FileSystem.FileSystem> =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => Effect.option(fs.stat(Path.resolve(dir)))).pipe(
    Effect.flatMap((info) =>
      Option.isSome(info) && info.value.type === "Directory"
        ? Effect.succeed(Path.resolve(dir))
        : Effect.fail(fail(`no config folder at ${Path.resolve(dir)} (--root must name an existing folder)`))
    )
  )

export const rootOf = (option: Option.Option<string>) =>
  Option.match(option, {
    onSome: existingRoot,
    onNone: () => Effect.orDie(TranscriptLayout.rootConfig)
  })

/** A unique match of `query` as a prefix of the items' ids: none when nothing matches; an error naming the candidates when several do. */
export const uniquePrefix = <A>(query: string, items: ReadonlyArray<A>, idOf: (item: A) => string, what: string): Effect.Effect<Option.Option<A>, CliError> => {
  const exact = items.find((item) => idOf(item) === query)
  if (exact !== undefined) return Effect.succeed(Option.some(exact))
  const matches = items.filter((item) => idOf(item).startsWith(query))
  if (matches.length <= 1) return Effect.succeed(Option.fromNullable(matches[0]))
  const ids = [...new Set(matches.map(idOf))]
  if (ids.length === 1) return Effect.succeed(Option.fromNullable(matches[0]))
  return Effect.fail(fail(`${JSON.stringify(query)} is the start of ${ids.length} ${what} (${ids.slice(0, 4).join(", ")}${ids.length > 4 ? ", …" : ""}): type more of it`))
}

/** Could be the start of an id: a uuid's characters, at least 4 of them. */
const idLike = (text: string) => /^[0-9a-f-]{4,36}$/i.test(text)

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

/** An existing transcript file, else an id (or a unique start of one), path or title the index knows: its path, if any. */
export const find = (query: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const info = yield* Effect.option(fs.stat(query))
    if (Option.isSome(info) && info.value.type === "File") return Option.some(Path.resolve(query))
    const index = yield* SessionIndex.SessionIndex
    const found = yield* index.resolve(query).pipe(Effect.mapError(describe))
    if (Option.isSome(found)) return Option.some(found.value.path)
    if (!idLike(query)) return Option.none<string>()
    // The start of an id, as `show` and `list` print it: unique among every session, workers included.
    const all = yield* index.list({ workers: true }).pipe(Effect.mapError(describe))
    return Option.map(yield* uniquePrefix(query.toLowerCase(), all, (info) => info.sessionId, "session ids"), (info) => info.path)
  })

/** `find`, or the one line that says nothing matched. */
export const resolve = (query: string, root: string) =>
  Effect.flatMap(find(query), Option.match({
    onSome: Effect.succeed,
    onNone: () => Effect.fail(fail(`no session matches ${JSON.stringify(query)} under ${root} (an id, a title or a path)`))
  }))

/**
 * The whole session id `query` (the start of an id, a title or a path) names
 * under `root`, if `root` exists and holds it.
 */
export const sessionIdIn = (query: string, root: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    if (!(yield* fs.exists(root).pipe(Effect.orElseSucceed(() => false)))) return Option.none<string>()
    const path = yield* find(query).pipe(Effect.provide(SessionIndex.layer.pipe(Layer.provide(TranscriptLayout.layer(root)))))
    return Option.map(path, (p) => Option.getOrElse(TranscriptLayout.sessionIdOfFile(Path.basename(p)), () => Path.basename(p, ".jsonl")))
  })

/**
 * The message `query` names in a transcript's effective conversation: a
 * uuid, or its start as `show` prints it (8 characters). Unmatched text is
 * returned as it is, for the loader to report.
 */
export const messageUuid = (path: string, query: string) =>
  Effect.gen(function*() {
    const view = yield* ResumeLoader.load(path).pipe(Effect.mapError(describe))
    const found = yield* uniquePrefix(query.toLowerCase(), view.entries, (entry) => entry.uuid, "messages")
    return Option.match(found, { onNone: () => query, onSome: (entry) => entry.uuid })
  })

/** The session a transcript holds, and the folder its CLI ran in. */
export const sessionOfFile = (path: string) =>
  Effect.gen(function*() {
    const sessionId = Option.getOrElse(TranscriptLayout.sessionIdOfFile(Path.basename(path)), () => Path.basename(path, ".jsonl"))
    const cwd = yield* TranscriptLayout.recordedCwd(path).pipe(Effect.mapError((e) => fail(`${path}: ${e.message}`)))
    if (Option.isNone(cwd)) return yield* fail(`${path} records no working folder`)
    return { sessionId, cwd: cwd.value }
  })
