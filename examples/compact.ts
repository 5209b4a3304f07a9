/**
 * Compact a stored Claude Code session offline, so that the next
 * `claude --resume <id>` starts from the summary and the retained window.
 *
 *   npx tsx examples/compact.ts <session-id|path.jsonl> [--root <config dir>] [--pass memory|summarize]
 *                               [--keep-tokens N] [--keep-messages N] [--env KEY=VALUE ...]
 *
 * The session must not be live (a running CLI holds it: the pass refuses).
 * `--pass memory` (pass 1) uses the session's `session-memory/summary.md` and
 * makes no model call. `--pass summarize` (pass 2) runs the CLI once, in the
 * session's own cwd, over a prepared copy of the history (images and
 * documents as placeholders), and restores recently read files after the
 * boundary; `--env KEY=VALUE` passes e.g. `ANTHROPIC_BASE_URL` to that CLI.
 * `--keep-*` set the retained window's minimums. It
 * prints the tokens before and after, and exits 1 with one line when it
 * cannot compact (no summary, the window would keep everything, over target).
 */
import { Args, Command, Options } from "@effect/cli"
import * as FileSystem from "@effect/platform/FileSystem"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { CompactPreparation, Compaction, SessionMemoryCompaction, SummarizingCompaction, TokenCounter } from "@skein/compact"
import { ProcessHost } from "@skein/kernel"
import { ResumeLoader, TranscriptLayout, TranscriptStore } from "@skein/store"
import { Console, Data, Effect, Either, HashMap, Layer, Option } from "effect"
import * as Os from "node:os"
import * as Path from "node:path"

class CannotCompact extends Data.TaggedError("CannotCompact")<{ readonly reason: string }> {
  override get message() {
    return this.reason
  }
}

/** The transcript of `target` (a path, or an id searched under `<root>/projects/*`) and its config root. */
const locate = (target: string, root: Option.Option<string>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    if (target.endsWith(".jsonl")) {
      const path = Path.resolve(target)
      // <root>/projects/<project>/<id>.jsonl
      return { path, root: Option.getOrElse(root, () => Path.dirname(Path.dirname(Path.dirname(path)))) }
    }
    const configRoot = Option.getOrElse(root, () => process.env.CLAUDE_CONFIG_DIR ?? Path.join(Os.homedir(), ".claude"))
    const projects = TranscriptLayout.projectsDir(configRoot)
    const dirs = yield* fs.readDirectory(projects).pipe(Effect.orElseSucceed((): ReadonlyArray<string> => []))
    for (const dir of dirs) {
      const path = Path.join(projects, dir, `${target}.jsonl`)
      if (yield* fs.exists(path).pipe(Effect.orElseSucceed(() => false))) return { path, root: configRoot }
    }
    return yield* new CannotCompact({ reason: `no session ${target} under ${projects}` })
  })

interface Input {
  readonly target: string
  readonly root: Option.Option<string>
  readonly pass: "memory" | "summarize"
  readonly keepTokens: Option.Option<number>
  readonly keepMessages: Option.Option<number>
  readonly env: Option.Option<HashMap.HashMap<string, string>>
}

/** Pass 2 offline: a CLI of its own (resumed over a prepared copy) writes the summary. */
const summarizePass = (input: Input, stored: { readonly path: string; readonly root: string; readonly sessionId: string; readonly cwd: string }, window: SessionMemoryCompaction.WindowOptions) =>
  Effect.gen(function*() {
    const view = yield* ResumeLoader.load(stored.path)
    // No model call for a session that cannot be compacted anyway.
    const planned = yield* SessionMemoryCompaction.plan(view, "", window)
    if (Either.isLeft(planned)) return Compaction.Outcome.Declined({ pass: "summarize", reason: planned.left })
    const env = Object.fromEntries(Option.match(input.env, { onNone: () => [], onSome: (m) => [...HashMap.toEntries(m)] }))
    const summary = yield* SummarizingCompaction.summarizeStored({
      launch: { cwd: stored.cwd, configDir: stored.root, env: { ...env, CLAUDE_CONFIG_DIR: stored.root }, bare: true },
      view,
      sessionId: stored.sessionId,
      entries: CompactPreparation.prepare(view.entries).entries
    })
    return yield* Compaction.compactWith({ cwd: stored.cwd, sessionId: stored.sessionId, window, summary, pass: "summarize", restore: {} })
  })

const compact = (input: Input) =>
  Effect.gen(function*() {
    const { path, root } = yield* locate(input.target, input.root)
    const sessionId = Option.getOrThrow(TranscriptLayout.sessionIdOfFile(Path.basename(path)))
    const cwd = yield* TranscriptLayout.recordedCwd(path).pipe(
      Effect.mapError((e) => new CannotCompact({ reason: e.message })),
      Effect.flatMap(Option.match({
        onNone: () => Effect.fail(new CannotCompact({ reason: `${path} records no cwd` })),
        onSome: Effect.succeed
      }))
    )
    const window = {
      minTokens: Option.getOrUndefined(input.keepTokens),
      minTextMessages: Option.getOrUndefined(input.keepMessages)
    }
    const store = TranscriptStore.layer.pipe(Layer.provide(TranscriptLayout.layer(root)), Layer.merge(TokenCounter.layer))
    const outcome = yield* (input.pass === "memory"
      ? Compaction.memoryPass({ cwd, sessionId, window })
      : summarizePass(input, { path, root, sessionId, cwd }, window)).pipe(
        Effect.mapError((e) => new CannotCompact({ reason: `${e._tag}: ${"reason" in e ? e.reason : e.message}` })),
        Effect.scoped,
        Effect.provide(Layer.mergeAll(store, ProcessHost.layerMemory()))
      )
    if (outcome._tag === "Declined") {
      return yield* new CannotCompact({ reason: `cannot compact ${sessionId}: ${outcome.reason._tag}` })
    }
    yield* Console.log(
      `compacted ${sessionId} (${outcome.pass}): ${outcome.preTokens} -> ${outcome.postTokens} tokens, ` +
        `${outcome.droppedEntries} entries behind the boundary, ${outcome.retainedEntries} kept`
    )
  })

const target = Args.text({ name: "session-id|path" })
const root = Options.directory("root").pipe(Options.withDescription("the config dir (CLAUDE_CONFIG_DIR)"), Options.optional)
const pass = Options.choice("pass", ["memory", "summarize"]).pipe(Options.withDefault("memory" as const))
const keepTokens = Options.integer("keep-tokens").pipe(Options.withDescription("the window grows until it holds N tokens and --keep-messages (at most 40000 tokens)"), Options.optional)
const keepMessages = Options.integer("keep-messages").pipe(
  Options.withDescription("and N messages with text"),
  Options.optional
)
const env = Options.keyValueMap("env").pipe(
  Options.withDescription("variables for a CLI the pass runs (summarize)"),
  Options.optional
)

const command = Command.make("compact", { target, root, pass, keepTokens, keepMessages, env }, (args) =>
  compact(args).pipe(
    Effect.catchTag("CannotCompact", (e) => Effect.zipRight(Console.error(e.reason), Effect.sync(() => (process.exitCode = 1))))
  )).pipe(Command.withDescription("Compact a stored Claude Code session offline."))

Command.run(command, { name: "skein-compact", version: "0.0.0" })(process.argv).pipe(
  Effect.provide(NodeContext.layer),
  NodeRuntime.runMain
)
