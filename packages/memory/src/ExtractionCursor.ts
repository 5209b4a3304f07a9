/**
 * Where memory extraction left off in a session: `lastMemoryMessageUuid`,
 * the last message a run has seen, kept beside the session's transcript
 * (`<project>/<session>/memory-cursor.json`) so a restart resumes there.
 *
 * A run reads only the messages after the cursor. When the cursor is gone
 * from the live context (compacted away: it lies before the last
 * `compact_boundary`, or is not in the file at all), the run counts from the
 * boundary instead, so it never stalls and never re-reads what compaction
 * already folded into the summary.
 *
 * @since 0.0.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { AtomicFile } from "@skein/kernel"
import { Transcript } from "@skein/protocol"
import { TranscriptLayout } from "@skein/store"
import { Effect, Option, Schema } from "effect"
import * as Path from "node:path"
import { MemoryIoError } from "./MemoryFolder.js"
import { isInside } from "./MemoryPolicy.js"

/**
 * @since 0.0.0
 */
export const Cursor = Schema.Struct({ lastMemoryMessageUuid: Schema.String })

/**
 * @since 0.0.0
 */
export interface Cursor extends Schema.Schema.Type<typeof Cursor> {}

/**
 * @since 0.0.0
 */
export const file = (projectDir: string, sessionId: string): string =>
  Path.join(TranscriptLayout.sessionPaths(projectDir, sessionId).sessionDir, "memory-cursor.json")

const decode = Schema.decodeUnknownOption(Schema.parseJson(Cursor))
const encode = Schema.encodeSync(Schema.parseJson(Cursor))

/**
 * The saved cursor; none if there is none or it does not decode.
 *
 * @since 0.0.0
 */
export const load = (path: string): Effect.Effect<Option.Option<string>, never, FileSystem.FileSystem> =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFileString(path)).pipe(
    Effect.map((text) => Option.map(decode(text), (cursor) => cursor.lastMemoryMessageUuid)),
    Effect.orElseSucceed(() => Option.none<string>())
  )

/**
 * @since 0.0.0
 */
export const save = (path: string, uuid: string): Effect.Effect<void, MemoryIoError, FileSystem.FileSystem> =>
  AtomicFile.makeDirectory(Path.dirname(path)).pipe(
    Effect.zipRight(AtomicFile.write(path, encode({ lastMemoryMessageUuid: uuid }))),
    Effect.mapError((cause) => new MemoryIoError({ path, operation: "save cursor", cause }))
  )

/**
 * @since 0.0.0
 */
export type Message = Transcript.UserEntry | Transcript.AssistantEntry

/**
 * @since 0.0.0
 */
export interface Pending {
  /** The main chain's messages to read, oldest first. */
  readonly messages: ReadonlyArray<Message>
  /** Counted from the cursor, from the last compaction boundary (the cursor was compacted away or missing), or from the start. */
  readonly from: "cursor" | "boundary" | "start"
}

const isMessage = (entry: Transcript.Entry): entry is Message =>
  (entry.type === "user" || entry.type === "assistant") && !entry.isSidechain

/**
 * The messages after `cursor` in a transcript's entries.
 *
 * @since 0.0.0
 */
export const pending = (entries: ReadonlyArray<Transcript.Entry>, cursor: Option.Option<string>): Pending => {
  const boundary = entries.findLastIndex(Transcript.isCompactBoundary)
  const at = Option.match(cursor, { onNone: () => -1, onSome: (uuid) => entries.findIndex((e) => Transcript.isChainEntry(e) && e.uuid === uuid) })
  const start = at > boundary ? at + 1 : boundary + 1
  const from = at > boundary ? "cursor" : boundary >= 0 ? "boundary" : "start"
  return { messages: entries.slice(start).filter(isMessage).filter((m) => m.type === "assistant" || m.isMeta !== true), from }
}

/**
 * Whether the main agent itself wrote to the memory folder in these
 * messages (then extraction skips the turn: the agent already did it).
 *
 * @since 0.0.0
 */
export const wroteMemory = (messages: ReadonlyArray<Message>, memoryDir: string, cwd: string): boolean =>
  messages.some((message) =>
    message.type === "assistant" &&
    message.message.content.some((block) => {
      if (block.type !== "tool_use" || !("input" in block) || !("name" in block)) return false
      if (!["Write", "Edit", "MultiEdit"].includes(String(block.name))) return false
      const input = block.input
      const target = typeof input === "object" && input !== null && "file_path" in input ? input.file_path : undefined
      return typeof target === "string" && isInside(target, memoryDir, cwd)
    })
  )
