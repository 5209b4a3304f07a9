/**
 * `skein sessions list|show|branch|rm`: the Claude Code sessions of a config
 * root. `show` prints the effective conversation a resumed CLI would see,
 * from the last compact boundary along the chain to the leaf; unknown
 * entries and malformed lines never stop it, they are counted and reported.
 */
import { Args, Command, HelpDoc, Options } from "@effect/cli"
import * as FileSystem from "@effect/platform/FileSystem"
import type { Transcript } from "@skein/protocol"
import { Branch, ResumeLoader, SessionIndex, TranscriptLayout } from "@skein/store"
import { Console, Effect, Option } from "effect"
import * as Path from "node:path"
import { fail } from "./CliError.js"
import * as Argv from "./internal/argv.js"
import * as Lookup from "./internal/lookup.js"
import * as Progress from "./Progress.js"
import { chatLoop, sessionOptions } from "./Run.js"

const root = Lookup.rootOption
const json = Options.boolean("json").pipe(Options.withDescription("print JSON"))
const { describe, resolve, withIndex } = Lookup

// ---------------------------------------------------------------------------
// Rendering
// ---------------------------------------------------------------------------

const flat = (text: string, max = 160): string => {
  const one = text.replace(/\s+/g, " ").trim()
  return one.length > max ? `${one.slice(0, max - 1)}…` : one
}

const field = (block: object, key: string): unknown => Object.getOwnPropertyDescriptor(block, key)?.value

const resultText = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
    ? content.map((c: unknown) => typeof c === "object" && c !== null && typeof field(c, "text") === "string" ? String(field(c, "text")) : "").join("\n")
    : ""

/** A block as text: cut to one line, or whole with `full`. */
const blockText = (block: unknown, full: boolean): string => {
  const cut = (text: string, max?: number) => full ? text : flat(text, max)
  if (typeof block !== "object" || block === null) return "?"
  const type = field(block, "type")
  switch (type) {
    case "text":
      return cut(String(field(block, "text") ?? ""))
    case "thinking":
      return `(thinking) ${cut(String(field(block, "thinking") ?? ""), 80)}`
    case "redacted_thinking":
      return "(redacted thinking)"
    case "tool_use":
      return `→ ${String(field(block, "name"))}(${cut(JSON.stringify(field(block, "input") ?? {}), 100)})`
    case "tool_result":
      return `← result${field(block, "is_error") === true ? " error" : ""}: ${cut(resultText(field(block, "content")), 100)}`
    default:
      return `(${String(type)})`
  }
}

const contentLines = (content: string | ReadonlyArray<unknown>, full: boolean): ReadonlyArray<string> =>
  typeof content === "string" ? [full ? content : flat(content)] : content.map((block) => blockText(block, full))

const entryLines = (entry: Transcript.ChainEntry, full: boolean): ReadonlyArray<string> => {
  switch (entry.type) {
    case "user": {
      const kind = entry.isCompactSummary === true ? "user/summary" : entry.isMeta === true ? "user/meta" : "user"
      return contentLines(entry.message.content, full).map((line) => `${kind.padEnd(16)} ${line}`)
    }
    case "assistant":
      return contentLines(entry.message.content, full).map((line) => `${"assistant".padEnd(16)} ${line}`)
    case "attachment":
      return [`${"attachment".padEnd(16)} ${entry.attachment.type}`]
    case "system": {
      const meta = entry.compactMetadata === undefined ? "" : ` (${entry.compactMetadata.trigger}, ${entry.compactMetadata.preTokens} tokens before)`
      return [`${`system/${entry.subtype ?? "?"}`.padEnd(16)} ${full ? entry.content ?? "" : flat(entry.content ?? "")}${meta}`]
    }
  }
}

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

const withExample = (description: string, example: string) =>
  HelpDoc.blocks([HelpDoc.p(description), HelpDoc.p(`Example: ${example}`)])

// ---------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------

const listOptions = {
  root,
  cwd: Options.directory("cwd").pipe(Options.withDescription("the project's folder (default: the current one)"), Options.optional),
  all: Options.boolean("all").pipe(Options.withDescription("every project, worker sessions included")),
  json
}

const list = Command.make("list", listOptions, (options) =>
  withIndex(options.root, () =>
    Effect.gen(function*() {
      const index = yield* SessionIndex.SessionIndex
      const dir = yield* TranscriptLayout.canonicalCwd(Option.getOrElse(options.cwd, () => process.cwd()))
      const sessions = yield* index.list(options.all ? { workers: true } : { cwd: dir }).pipe(
        Effect.mapError(describe),
        Progress.withProgress("reading sessions")
      )
      if (options.json) return yield* Console.log(JSON.stringify(sessions))
      if (sessions.length === 0) return yield* Console.log("no sessions")
      for (const info of sessions) {
        const flags = [info.live ? `live (pid ${info.ownerPid})` : "", info.isWorker ? "worker" : ""].filter((f) => f !== "")
        yield* Console.log(
          `${info.sessionId}  ${info.mtime.toISOString()}  ${String(info.messageCount).padStart(4)} msgs  ${
            options.all ? `${Path.basename(info.projectDir)}  ` : ""
          }${flat(info.title ?? "", 60)}${flags.length > 0 ? `  [${flags.join(", ")}]` : ""}`
        )
      }
    }))).pipe(Command.withDescription(withExample("List sessions, newest first.", "skein sessions list --all --json")))

const showOptions = {
  root,
  at: Options.text("at").pipe(Options.withDescription("stop the view at this message (a uuid, or its start as show prints it)"), Options.optional),
  full: Options.boolean("full").pipe(Options.withDescription("print each message whole, not a one-line preview")),
  json
}

const show = Command.make("show", { ...showOptions, session: Args.text({ name: "id|title|path" }) }, (options) =>
  withIndex(options.root, (r) =>
    Effect.gen(function*() {
      const path = yield* resolve(options.session, r)
      const sidechain = path.includes(`${Path.sep}subagents${Path.sep}`)
      const at = Option.isSome(options.at) ? yield* Lookup.messageUuid(path, options.at.value) : undefined
      const view = yield* ResumeLoader.load(path, { resumeAt: at, sidechain }).pipe(Effect.mapError(describe))
      if (options.json) {
        return yield* Console.log(JSON.stringify({
          path,
          sessionId: view.sessionId ?? null,
          leafUuid: view.leafUuid ?? null,
          compacted: Option.isSome(view.boundary),
          metadata: view.metadata,
          usage: view.usage,
          entries: view.entries.map((entry) => ({ uuid: entry.uuid, parentUuid: entry.parentUuid, type: entry.type })),
          messages: view.messages,
          unknownTypes: view.unknownTypes,
          diagnostics: view.diagnostics
        }))
      }
      const title = ResumeLoader.title(view.metadata)
      yield* Console.log(`${view.sessionId ?? Path.basename(path)}${title === undefined ? "" : `  "${title}"`}`)
      yield* Console.log(
        `${view.entries.length} entries, ${view.messages.length} messages${Option.isSome(view.boundary) ? ", from the last compact boundary" : ""}; ` +
          `usage since: ${view.usage.input_tokens} in / ${view.usage.output_tokens} out`
      )
      for (const entry of view.entries) {
        for (const line of entryLines(entry, options.full)) yield* Console.log(`${entry.uuid.slice(0, 8)}  ${line}`)
      }
      const unknown = Object.entries(view.unknownTypes)
      if (unknown.length > 0) yield* Console.log(`skipped: ${unknown.map(([type, n]) => `${type} ×${n}`).join(", ")}`)
      for (const d of view.diagnostics) yield* Console.log(`note: ${diagnosticLine(d)}`)
    }))).pipe(Command.withDescription(withExample(
      "Print the effective conversation a resumed CLI would see.",
      "skein sessions show 3f2c… --full"
    )))

const branchOptions = {
  root,
  at: Options.text("at").pipe(Options.withDescription("the message to branch from (a uuid, or its first 8 characters as show prints them)"))
}

const branch = Command.make("branch", { ...branchOptions, session: Args.text({ name: "id|title|path" }) }, (options) =>
  withIndex(options.root, (r) =>
    Effect.gen(function*() {
      const path = yield* resolve(options.session, r)
      const at = yield* Lookup.messageUuid(path, options.at)
      const branched = yield* Branch.branch(path, { at }).pipe(Effect.mapError(describe))
      yield* Console.log(branched.sessionId)
    }))).pipe(Command.withDescription(withExample(
      "Write a new session from a message of another; prints its id.",
      "skein sessions branch 3f2c… --at 9a41…"
    )))

const rmOptions = {
  root,
  force: Options.boolean("force").pipe(Options.withDescription("remove it even if a live process holds it"))
}

const rm = Command.make("rm", { ...rmOptions, session: Args.text({ name: "id|title|path" }) }, (options) =>
  withIndex(options.root, (r) =>
    Effect.gen(function*() {
      const index = yield* SessionIndex.SessionIndex
      const path = yield* resolve(options.session, r)
      const info = yield* index.resolve(path).pipe(Effect.mapError(describe))
      if (Option.isSome(info) && info.value.live && !options.force) {
        return yield* fail(`session ${info.value.sessionId} is live (pid ${info.value.ownerPid}); pass --force to remove it anyway`)
      }
      const fs = yield* FileSystem.FileSystem
      const sessionId = Option.getOrElse(TranscriptLayout.sessionIdOfFile(path), () => Path.basename(path))
      const paths = TranscriptLayout.sessionPaths(Path.dirname(path), sessionId)
      const removeAll = Effect.all([fs.remove(paths.transcript), fs.remove(paths.sessionDir, { recursive: true }).pipe(
        Effect.catchIf((e) => e._tag === "SystemError" && e.reason === "NotFound", () => Effect.void)
      )])
      yield* removeAll.pipe(Effect.mapError((e) => fail(`${path}: ${e.message}`)))
      yield* Console.log(`removed ${sessionId}`)
    }))).pipe(Command.withDescription(withExample(
      "Remove a session: its transcript and its folder (subagents, memory).",
      "skein sessions rm 3f2c…"
    )))

const { continue: _continue, resume: _resume, ...resumeOptions } = sessionOptions

/** A chat on a stored session, in the folder its CLI ran in (where the CLI looks for it). */
const resume = Command.make("resume", { ...resumeOptions, session: Args.text({ name: "id|title|path" }) }, ({ session, ...config }) =>
  Effect.gen(function*() {
    const path = yield* withIndex(config.root, (r) => resolve(session, r))
    const found = yield* Lookup.sessionOfFile(path)
    yield* chatLoop({ ...config, resume: Option.some(found.sessionId), continue: false }, found.cwd)
  })).pipe(Command.withDescription(withExample(
    "Chat on in a stored session: each line of stdin is a turn, in the folder the session ran in.",
    "skein sessions resume 3f2c… --allow Read"
  )))

export const sessions = Command.make("sessions").pipe(
  Command.withDescription(withExample(
    "Claude Code sessions: list, show (as resumed), branch, resume, rm.",
    "skein sessions list --root /tmp/claude-config"
  )),
  Command.withSubcommands([list, show, branch, resume, rm])
)

export const sessionsSpec: Argv.Spec = Argv.group("sessions", {
  list: listOptions,
  show: showOptions,
  branch: branchOptions,
  resume: resumeOptions,
  rm: rmOptions
})
