/**
 * Browse, show and branch Claude Code sessions in a config root.
 *
 *   npx tsx examples/sessions.ts list                       # sessions of the current directory
 *   npx tsx examples/sessions.ts list --cwd ~/src/app --json
 *   npx tsx examples/sessions.ts list --all                 # every project, subagent transcripts too
 *   npx tsx examples/sessions.ts show <id|title|path> [--at <uuid>] [--json]
 *   npx tsx examples/sessions.ts branch <id> --at <uuid>    # prints the new session id
 *   npx tsx examples/sessions.ts --root /tmp/claude-config list
 *
 * `--root` defaults to CLAUDE_CONFIG_DIR, else ~/.claude. `show` prints the
 * effective conversation a resumed CLI would see: from the last compact
 * boundary, along the chain to the leaf. Unknown entries and malformed lines
 * never stop it; they are counted and reported.
 */
import { Args, Command, Options } from "@effect/cli"
import { FileSystem } from "@effect/platform"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import type { Transcript } from "@skein/protocol"
import { Branch, ResumeLoader, SessionIndex, TranscriptLayout } from "@skein/store"
import { Console, Effect, Layer, Option, Schema } from "effect"
import * as Path from "node:path"

// ---------------------------------------------------------------------------
// Finding sessions
// ---------------------------------------------------------------------------

class SessionNotFound extends Schema.TaggedError<SessionNotFound>()("SessionNotFound", {
  query: Schema.String
}) {}

const isDirectory = (path: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.stat(path)).pipe(
    Effect.map((info) => info.type === "Directory"),
    Effect.orElseSucceed(() => false)
  )

interface SubagentFile {
  readonly id: string
  readonly path: string
  readonly project: string
  readonly mtime: Date
}

/** Subagent transcripts, `<project>/<sessionId>/subagents/agent-<id>.jsonl`: kept out of `list` unless `--all`. */
const subagentFiles = (root: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const projects = TranscriptLayout.projectsDir(root)
    const out: Array<SubagentFile> = []
    if (!(yield* isDirectory(projects))) return out
    for (const project of yield* fs.readDirectory(projects)) {
      for (const name of yield* fs.readDirectory(Path.join(projects, project)).pipe(Effect.orElseSucceed(() => []))) {
        const dir = Path.join(projects, project, name, "subagents")
        if (!(yield* isDirectory(dir))) continue
        for (const file of yield* fs.readDirectory(dir)) {
          if (!file.endsWith(TranscriptLayout.transcriptExtension)) continue
          const path = Path.join(dir, file)
          const info = yield* Effect.option(fs.stat(path))
          const mtime = Option.getOrElse(Option.flatMap(info, (i) => i.mtime), () => new Date(0))
          out.push({ id: `${name}/${Path.basename(file, TranscriptLayout.transcriptExtension)}`, path, project, mtime })
        }
      }
    }
    return out
  })

/** An existing file (a subagent transcript too), else an id, path or title the session index knows. */
const resolve = (query: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    if ((yield* fs.exists(query)) && !(yield* isDirectory(query))) return Path.resolve(query)
    const index = yield* SessionIndex.SessionIndex
    const found = yield* index.resolve(query)
    if (Option.isSome(found)) return found.value.path
    return yield* new SessionNotFound({ query })
  })

// ---------------------------------------------------------------------------
// Rendering
// ---------------------------------------------------------------------------

const oneLine = (text: string, max = 160): string => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}

const inputSummary = (input: { readonly [key: string]: unknown }): string =>
  oneLine(
    Object.entries(input).map(([key, value]) => `${key}=${typeof value === "string" ? JSON.stringify(value) : JSON.stringify(value)}`)
      .join(", "),
    100
  )

const blockSummary = (block: unknown): string => {
  if (typeof block !== "object" || block === null || !("type" in block)) return "?"
  switch (block.type) {
    case "text":
      return "text" in block && typeof block.text === "string" ? oneLine(block.text) : "text"
    case "thinking":
      return "thinking" in block && typeof block.thinking === "string" ? `(thinking) ${oneLine(block.thinking, 80)}` : "(thinking)"
    case "redacted_thinking":
      return "(redacted thinking)"
    case "tool_use":
      return "name" in block && "input" in block && typeof block.input === "object" && block.input !== null
        ? `→ ${String(block.name)}(${inputSummary({ ...block.input })})`
        : "→ tool"
    case "tool_result": {
      const error = "is_error" in block && block.is_error === true ? " error" : ""
      const content = "content" in block ? block.content : undefined
      const text = typeof content === "string"
        ? content
        : Array.isArray(content)
        ? content.map((c) => typeof c === "object" && c !== null && "text" in c ? String(c.text) : "").join(" ")
        : ""
      return `← result${error}: ${oneLine(text, 100)}`
    }
    default:
      return `(${String(block.type)})`
  }
}

const contentSummary = (content: string | ReadonlyArray<unknown>): ReadonlyArray<string> =>
  typeof content === "string" ? [oneLine(content)] : content.map(blockSummary)

const entryLines = (entry: Transcript.ChainEntry): ReadonlyArray<string> => {
  switch (entry.type) {
    case "user": {
      const kind = entry.isCompactSummary === true ? "user/summary" : entry.isMeta === true ? "user/meta" : "user"
      return contentSummary(entry.message.content).map((line) => `${kind.padEnd(16)} ${line}`)
    }
    case "assistant":
      return contentSummary(entry.message.content).map((line) => `${"assistant".padEnd(16)} ${line}`)
    case "attachment":
      return [`${"attachment".padEnd(16)} ${entry.attachment.type}`]
    case "system": {
      const meta = entry.compactMetadata === undefined
        ? ""
        : ` (${entry.compactMetadata.trigger}, ${entry.compactMetadata.preTokens} tokens before)`
      return [`${`system/${entry.subtype ?? "?"}`.padEnd(16)} ${oneLine(entry.content ?? "")}${meta}`]
    }
  }
}

const entryJson = (entry: Transcript.ChainEntry) => ({
  uuid: entry.uuid,
  parentUuid: entry.parentUuid,
  type: entry.type,
  ...(entry.type === "system" ? { subtype: entry.subtype } : {}),
  ...(entry.type === "user" || entry.type === "assistant"
    ? { role: entry.message.role, summary: contentSummary(entry.message.content) }
    : {}),
  ...(entry.type === "attachment" ? { attachment: entry.attachment.type } : {})
})

const diagnosticLine = (d: ResumeLoader.Diagnostic): string => {
  switch (d._tag) {
    case "Malformed":
      return `line ${d.line} (from the boundary): malformed ${d.type}: ${d.issue}`
    case "Unparseable":
      return `line ${d.line} (from the boundary): not JSON: ${d.error}`
    case "Oversized":
      return `line ${d.line} (from the boundary): ${d.bytes} bytes, over ${d.limit}`
    case "Orphan":
      return `${d.uuid}: parent ${d.parentUuid} missing, treated as root`
    case "Cycle":
      return `${d.uuid}: parent chain loops, cut here`
    case "LeafNotFound":
      return `last-prompt leaf ${d.leafUuid} missing, used the last entry`
    case "PreservedMissing":
      return `preserved messages not found: ${d.uuids.join(", ")}`
    case "Relinked":
      return `${d.uuid}: parent ${d.from ?? "null"} → ${d.to} (${d.reason})`
  }
}

// ---------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------

const rootOption = Options.directory("root").pipe(
  Options.withDescription("the Claude config root (default: CLAUDE_CONFIG_DIR, else ~/.claude)"),
  Options.optional
)
const json = Options.boolean("json").pipe(Options.withDescription("print JSON"))

const sessions = Command.make("sessions", { root: rootOption })

const rootOf = Effect.gen(function*() {
  const { root } = yield* sessions
  return Option.isSome(root) ? Path.resolve(root.value) : yield* Effect.orDie(TranscriptLayout.rootConfig)
})

/** Runs `effect` with a session index over the chosen root. */
const withIndex = <A, E, R>(effect: (root: string) => Effect.Effect<A, E, R>) =>
  Effect.flatMap(rootOf, (root) =>
    effect(root).pipe(Effect.provide(SessionIndex.layer.pipe(Layer.provide(TranscriptLayout.layer(root))))))

const list = Command.make("list", {
  cwd: Options.directory("cwd").pipe(Options.withDescription("the project's directory (default: the current one)"), Options.optional),
  all: Options.boolean("all").pipe(Options.withDescription("every project, subagent transcripts included")),
  json
}, ({ all, cwd, json }) =>
  withIndex((root) =>
    Effect.gen(function*() {
      const index = yield* SessionIndex.SessionIndex
      const dir = yield* TranscriptLayout.canonicalCwd(Option.getOrElse(cwd, () => process.cwd()))
      const main = yield* index.list(all ? { workers: true } : { cwd: dir })
      const subagents = all ? yield* subagentFiles(root) : []
      if (json) {
        return yield* Console.log(JSON.stringify({ sessions: main, subagents }, null, 2))
      }
      if (main.length === 0 && subagents.length === 0) return yield* Console.log("no sessions")
      for (const info of main) {
        const flags = [info.live ? `live (pid ${info.ownerPid})` : "", info.isWorker ? "worker" : ""].filter((f) => f !== "")
        yield* Console.log(
          `${info.sessionId}  ${info.mtime.toISOString()}  ${String(info.messageCount).padStart(4)} msgs  ${
            all ? `${Path.basename(info.projectDir)}  ` : ""
          }${oneLine(info.title ?? "", 60)}${flags.length > 0 ? `  [${flags.join(", ")}]` : ""}`
        )
      }
      for (const sub of subagents) {
        yield* Console.log(`${sub.id}  ${sub.mtime.toISOString()}  subagent  ${sub.project}`)
      }
    })
  ).pipe(report)
).pipe(Command.withDescription("List sessions, newest first."))

const show = Command.make("show", {
  session: Args.text({ name: "id|title|path" }),
  at: Options.text("at").pipe(Options.withDescription("stop the view at this message uuid"), Options.optional),
  json
}, ({ at, json, session }) =>
  Effect.gen(function*() {
    const path = yield* withIndex(() => resolve(session))
    const sidechain = path.includes(`${Path.sep}subagents${Path.sep}`)
    const view = yield* ResumeLoader.load(path, { resumeAt: Option.getOrUndefined(at), sidechain })
    if (json) {
      return yield* Console.log(JSON.stringify(
        {
          path,
          sessionId: view.sessionId ?? null,
          leafUuid: view.leafUuid ?? null,
          compacted: Option.isSome(view.boundary),
          metadata: view.metadata,
          usage: view.usage,
          entries: view.entries.map(entryJson),
          messages: view.messages,
          unknownTypes: view.unknownTypes,
          diagnostics: view.diagnostics
        },
        null,
        2
      ))
    }
    const title = ResumeLoader.title(view.metadata)
    yield* Console.log(`${view.sessionId ?? Path.basename(path)}${title === undefined ? "" : `  "${title}"`}`)
    yield* Console.log(
      `${view.entries.length} entries, ${view.messages.length} messages${
        Option.isSome(view.boundary) ? ", from the last compact boundary" : ""
      }; usage since: ${view.usage.input_tokens} in / ${view.usage.output_tokens} out`
    )
    for (const entry of view.entries) {
      for (const line of entryLines(entry)) yield* Console.log(`${entry.uuid.slice(0, 8)}  ${line}`)
    }
    const unknown = Object.entries(view.unknownTypes)
    if (unknown.length > 0) yield* Console.log(`skipped: ${unknown.map(([type, n]) => `${type} ×${n}`).join(", ")}`)
    for (const d of view.diagnostics) yield* Console.log(`note: ${diagnosticLine(d)}`)
  }).pipe(report)).pipe(Command.withDescription("Print the effective conversation a resumed CLI would see."))

const branch = Command.make("branch", {
  session: Args.text({ name: "id|title|path" }),
  at: Options.text("at").pipe(Options.withDescription("the message to branch from"))
}, ({ at, session }) =>
  Effect.gen(function*() {
    const path = yield* withIndex(() => resolve(session))
    const branched = yield* Branch.branch(path, { at })
    yield* Console.log(branched.sessionId)
  }).pipe(report)).pipe(Command.withDescription("Write a new session from a message of another; prints its id."))

/** Known failures print one line and exit 1. */
const fail = (message: string) =>
  Console.error(`sessions: ${message}`).pipe(Effect.zipRight(Effect.sync(() => {
    process.exitCode = 1
  })))

const report = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(Effect.catchIf(
    (error): error is Extract<
      E,
      ResumeLoader.LoadError | Branch.BranchWriteError | SessionNotFound | SessionIndex.SessionIndexError
    > =>
      error instanceof SessionNotFound || error instanceof SessionIndex.SessionIndexError || error instanceof ResumeLoader.ResumeAtNotFound ||
      error instanceof ResumeLoader.TranscriptNotFound || error instanceof ResumeLoader.TranscriptReadError ||
      error instanceof Branch.BranchWriteError,
    (error) => {
      switch (error._tag) {
        case "SessionNotFound":
          return fail(`no session matches ${JSON.stringify(error.query)} (id, title or path)`)
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
  ))

const cli = Command.run(
  sessions.pipe(
    Command.withDescription("Claude Code sessions: list, show (as resumed), branch."),
    Command.withSubcommands([list, show, branch])
  ),
  { name: "skein-sessions", version: "0.0.0" }
)

cli(process.argv).pipe(Effect.provide(NodeContext.layer), NodeRuntime.runMain)
