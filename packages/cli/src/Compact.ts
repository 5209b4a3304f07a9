/**
 * `skein compact <id>`: compacts a stored session that no CLI is running,
 * so that the next `claude --resume <id>` starts from the summary and the
 * retained window.
 *
 * `--pass memory` (the default) takes the session's own
 * `session-memory/summary.md` as the summary and asks no model.
 * `--pass summarize` resumes the session in a CLI for as long as it takes a
 * forked worker of it to write the summary, ends that CLI, then writes the
 * boundary: it needs a model (the person's login, or `--fake-model`).
 */
import { Args, Command, HelpDoc, Options } from "@effect/cli"
import * as FileSystem from "@effect/platform/FileSystem"
import { Compaction, type SessionMemoryCompaction, SummarizingCompaction, TokenCounter } from "@skein/compact"
import { Permissions, Session } from "@skein/session"
import { TranscriptLayout, TranscriptStore } from "@skein/store"
import { Console, Effect, Layer, Option } from "effect"
import * as Path from "node:path"
import { fail, oneLine } from "./CliError.js"
import * as Argv from "./internal/argv.js"
import * as Launch from "./internal/launch.js"
import * as Lookup from "./internal/lookup.js"
import * as Progress from "./Progress.js"
import * as Run from "./Run.js"

const compactOptions = {
  root: Lookup.rootOption,
  pass: Options.choice("pass", ["memory", "summarize"]).pipe(
    Options.withDescription("memory: the session's summary.md, no model call; summarize: a model writes the summary"),
    Options.withDefault("memory" as const)
  ),
  keepTokens: Options.integer("keep-tokens").pipe(
    Options.withDescription("the retained window grows until it holds N tokens (default 10000) and --keep-messages; at most 40000 tokens"),
    Options.optional
  ),
  keepMessages: Options.integer("keep-messages").pipe(
    Options.withDescription("and N messages with text (default 5)"),
    Options.optional
  ),
  fakeModel: Options.boolean("fake-model").pipe(Options.withDescription("--pass summarize: ask a local fake model")),
  claude: Options.file("claude").pipe(Options.withDescription("the Claude Code executable (--pass summarize)"), Options.optional),
  json: Options.boolean("json").pipe(Options.withDescription("print the outcome as JSON"))
} as const

const declinedLine = (sessionId: string, reason: SessionMemoryCompaction.Declined): string => {
  switch (reason._tag) {
    case "NoSummary":
      return `cannot compact ${sessionId}: no session memory at ${reason.path} (try --pass summarize)`
    case "TemplateOnly":
      return `cannot compact ${sessionId}: the session memory at ${reason.path} is an unfilled template (try --pass summarize)`
    case "CoveredMessageMissing":
      return `cannot compact ${sessionId}: the session memory covers message ${reason.uuid}, which is no longer in the session (update it, or try --pass summarize)`
    case "Empty":
      return `cannot compact ${sessionId}: it holds no message`
    case "KeepsEverything":
      return `cannot compact ${sessionId}: the retained window (${reason.windowTokens} tokens) would keep every message; lower --keep-tokens / --keep-messages`
    case "OverTarget":
      return `cannot compact ${sessionId}: summary (${reason.summaryTokens}) and window (${reason.windowTokens}) are over ${reason.targetTokens} tokens`
  }
}

/**
 * The summary of pass 2. A throwaway fork of the stored session (`--resume
 * --fork-session`: the original transcript is not touched) is asked the
 * summarizing prompt, with no tools; its own transcript is removed after.
 */
const summarize = (target: { readonly sessionId: string; readonly cwd: string }, options: {
  readonly fakeModel: boolean
  readonly root: string
  readonly claude: Option.Option<string>
}) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const forkId = yield* Effect.scoped(Effect.gen(function*() {
      const where = yield* Launch.target({ fakeModel: options.fakeModel, root: Option.some(options.root) })
      const session = yield* Session.start({
        cwd: target.cwd,
        resume: target.sessionId,
        forkSession: true,
        configDir: options.root,
        env: where.env,
        bare: where.bare,
        executable: Option.getOrUndefined(options.claude),
        stopTimeouts: { stdinGrace: "1 second", termGrace: "2 seconds" }
      }).pipe(
        Effect.provide(Permissions.layer(() => Effect.succeed(Permissions.deny("compaction runs no tools")))),
        Effect.mapError(Run.describe)
      )
      const summary = yield* Effect.flatMap(session.send(SummarizingCompaction.prompt), (turn) => turn.result).pipe(Effect.mapError(Run.describe))
      const forkId = yield* session.sessionId.pipe(Effect.mapError(Run.describe))
      yield* session.end
      yield* Effect.ignore(Effect.timeout(session.exit, "5 seconds"))
      if (summary.interrupted) return yield* fail("the summarizing turn was interrupted")
      if (summary.isError) return yield* fail(`the summarizing turn failed: ${Run.failureLine(summary)}`)
      return { forkId, text: SummarizingCompaction.extract(summary.text ?? "") }
    }))
    const project = TranscriptLayout.projectDir(options.root, yield* TranscriptLayout.canonicalCwd(target.cwd))
    yield* Effect.ignore(fs.remove(Path.join(project, `${forkId.forkId}.jsonl`)))
    yield* Effect.ignore(fs.remove(Path.join(project, forkId.forkId), { recursive: true }))
    return yield* Option.match(forkId.text, {
      onNone: () => Effect.fail(fail("the model answered no summary")),
      onSome: Effect.succeed
    })
  })

const run = Effect.fn("Compact.run")(function*(options: {
  readonly root: Option.Option<string>
  readonly session: string
  readonly pass: "memory" | "summarize"
  readonly keepTokens: Option.Option<number>
  readonly keepMessages: Option.Option<number>
  readonly fakeModel: boolean
  readonly claude: Option.Option<string>
  readonly json: boolean
}) {
  const root = yield* Lookup.rootOf(options.root)
  const path = yield* Lookup.withIndex(options.root, (r) => Lookup.resolve(options.session, r))
  const target = yield* Lookup.sessionOfFile(path)
  const cwd = yield* TranscriptLayout.canonicalCwd(target.cwd)
  const window = { minTokens: Option.getOrUndefined(options.keepTokens), minTextMessages: Option.getOrUndefined(options.keepMessages) }
  const summary = options.pass === "summarize"
    ? Option.some(
      yield* summarize(target, { fakeModel: options.fakeModel, root, claude: options.claude }).pipe(
        Progress.withProgress(`summarizing ${target.sessionId}`),
      )
    )
    : Option.none()
  const pass = Option.match(summary, {
    onNone: () => Compaction.memoryPass({ cwd, sessionId: target.sessionId, window }),
    onSome: (text) => Compaction.compactWith({ cwd, sessionId: target.sessionId, window, summary: text, pass: "summarize" })
  })
  const outcome = yield* pass.pipe(
    Effect.mapError((e) =>
      e._tag === "TranscriptLive"
        ? fail(`session ${target.sessionId} is live (pid ${e.pid}): end its CLI first`)
        : fail(`cannot compact ${target.sessionId}: ${oneLine(e.message)}`)
    )
  )
  if (outcome._tag === "Declined") return yield* fail(declinedLine(target.sessionId, outcome.reason))
  if (options.json) return yield* Console.log(JSON.stringify({ sessionId: target.sessionId, ...outcome }))
  yield* Console.log(
    `compacted ${target.sessionId} (${outcome.pass}): ${outcome.preTokens} -> ${outcome.postTokens} tokens, ` +
      `${outcome.droppedEntries} entries behind the boundary, ${outcome.retainedEntries} kept`
  )
})

/** The store over the chosen root, for the passes and for a summarizing worker. */
const withStore = <A, E, R>(root: Option.Option<string>, effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Lookup.rootOf(root), (r) =>
    Effect.provide(effect, TranscriptStore.layer.pipe(Layer.provideMerge(TranscriptLayout.layer(r)), Layer.merge(TokenCounter.layer))))

export const compact = Command.make(
  "compact",
  { ...compactOptions, session: Args.text({ name: "id|title|path" }) },
  (options) => withStore(options.root, run(options))
).pipe(
  Command.withDescription(HelpDoc.blocks([
    HelpDoc.p("Compact a stored session no CLI is running; the next resume starts from the summary and the kept window."),
    HelpDoc.p("Example: skein compact 3f2c… --pass memory --keep-messages 2")
  ]))
)

export const compactSpec: Argv.Spec = Argv.leaf("compact", compactOptions)
