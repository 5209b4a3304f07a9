/**
 * Branching: a new session made of another session's effective conversation
 * up to a chosen message.
 *
 * The branch is an ordinary transcript the CLI can `--resume`: the chain is
 * written as a straight line with fresh uuids (parent links remapped), the
 * new session id in every entry, and a `last-prompt` whose `leafUuid` is the
 * copy of the branch point. A first `skein-branch` entry names the parent
 * session and the branch point; the CLI skips entry types it does not know.
 */
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as AtomicFile from "@skein/kernel/AtomicFile"
import type { Transcript } from "@skein/protocol"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Crypto from "node:crypto"
import * as Path from "node:path"
import * as ResumeLoader from "./ResumeLoader.js"

/** The branch file could not be written. */
export class BranchWriteError extends Schema.TaggedError<BranchWriteError>()("BranchWriteError", {
  path: Schema.String,
  message: Schema.String
}) {}

/** The header entry of a branch. */
export const Header = Schema.Struct({
  type: Schema.Literal("skein-branch"),
  sessionId: Schema.String,
  parentSessionId: Schema.String,
  /** The branch point, as a uuid of the parent session. */
  parentUuid: Schema.String,
  /** The copy of the branch point in this session. */
  leafUuid: Schema.String,
  timestamp: Schema.String
})
export interface Header extends Schema.Schema.Type<typeof Header> {}

export interface Options {
  /** The branch point: a message of the parent's effective conversation. */
  readonly at: string
  /** The new session id; a random UUID if omitted. */
  readonly sessionId?: string | undefined
  /** Where to write `<sessionId>.jsonl`; the parent's folder if omitted. */
  readonly directory?: string | undefined
  readonly loader?: Omit<ResumeLoader.Options, "resumeAt"> | undefined
}

export interface Branched {
  readonly sessionId: string
  readonly path: string
  readonly header: Header
  /** Chain entries written. */
  readonly entries: number
}

type Json = { readonly [key: string]: unknown }

/** Boundary fields that describe the parent's file layout and no longer apply to a straight chain. */
const stripPreserved = (compactMetadata: Transcript.CompactMetadata): Json =>
  Object.fromEntries(
    Object.entries(compactMetadata).filter(([key]) => key !== "preservedSegment" && key !== "preservedMessages")
  )

const lastPromptText = (entries: ReadonlyArray<Transcript.ChainEntry>): string => {
  for (let i = entries.length - 1; i >= 0; i--) {
    const entry = entries[i]!
    if (entry.type !== "user" || entry.isMeta === true || entry.isCompactSummary === true) continue
    const content = entry.message.content
    if (typeof content === "string") return content
    const text = content.find((block) => block.type === "text" && "text" in block)
    if (text !== undefined && "text" in text) return text.text
  }
  return ""
}

/** The lines of a branch: header, the remapped chain, then `last-prompt`. */
export const render = (
  conversation: ResumeLoader.Conversation,
  options: { readonly sessionId: string; readonly parentSessionId: string; readonly at: string; readonly now: Date }
): { readonly header: Header; readonly lines: ReadonlyArray<Json> } => {
  const ids = new Map<string, string>()
  for (const entry of conversation.entries) ids.set(entry.uuid, Crypto.randomUUID())
  const chain = conversation.entries.map((entry, index): Json => {
    const { logicalParentUuid: _logical, ...rest } = entry
    const copy: Json = {
      ...rest,
      uuid: ids.get(entry.uuid)!,
      parentUuid: index === 0 ? null : ids.get(conversation.entries[index - 1]!.uuid)!,
      sessionId: options.sessionId
    }
    return entry.type === "system" && entry.compactMetadata !== undefined
      ? { ...copy, compactMetadata: stripPreserved(entry.compactMetadata) }
      : copy
  })
  const header: Header = {
    type: "skein-branch",
    sessionId: options.sessionId,
    parentSessionId: options.parentSessionId,
    parentUuid: options.at,
    leafUuid: ids.get(options.at)!,
    timestamp: options.now.toISOString()
  }
  const lastPrompt = {
    type: "last-prompt",
    lastPrompt: lastPromptText(conversation.entries),
    leafUuid: header.leafUuid,
    sessionId: options.sessionId
  }
  return { header, lines: [header, ...chain, lastPrompt] }
}

/**
 * Writes a branch of the transcript at `path` ending at `options.at`, and
 * returns the new session. The file appears whole or not at all (it is
 * written and fsynced beside its final name and linked into place, never
 * over an existing session, and the folder is fsynced after), with mode 0600.
 */
export const branch: (
  path: string,
  options: Options
) => Effect.Effect<Branched, ResumeLoader.LoadError | BranchWriteError, FileSystem.FileSystem> = Effect.fn(
  "Branch.branch"
)(function*(path: string, options: Options) {
  const conversation = yield* ResumeLoader.load(path, { ...options.loader, resumeAt: options.at })
  const sessionId = options.sessionId ?? Crypto.randomUUID()
  const parentSessionId = conversation.sessionId ?? Path.basename(path, ".jsonl")
  const { header, lines } = render(conversation, { sessionId, parentSessionId, at: options.at, now: new Date() })
  const directory = options.directory ?? Path.dirname(path)
  const target = Path.join(directory, `${sessionId}.jsonl`)
  const text = lines.map((line) => JSON.stringify(line)).join("\n") + "\n"
  const fail = (error: PlatformError) => new BranchWriteError({ path: target, message: error.message })
  // Synced, linked into place (link, unlike rename, fails rather than
  // replace an existing session), then the folder synced.
  yield* AtomicFile.makeDirectory(directory).pipe(
    Effect.zipRight(AtomicFile.write(target, text, { replace: false })),
    Effect.mapError(fail)
  )
  return { sessionId, path: target, header, entries: conversation.entries.length }
})
