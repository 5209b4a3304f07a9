/**
 * The point a session's `summary.md` covers: the last message the summary
 * was written from (the CLI keeps the same fact in memory as
 * `lastSummarizedMessageId`). Session memory (`@skein/memory`) writes it
 * after each update of the summary; session-memory compaction
 * (`@skein/compact`) reads it and keeps every message after it in the
 * retained window, so a message the summary has not seen is never dropped
 * from both.
 *
 * It lives beside the summary, `<session>/session-memory/summary.covered.json`,
 * and is written atomically. It is only ever moved forward after the summary
 * has changed, so it may lag the summary (the window then keeps more) but
 * never lead it.
 *
 * @since 0.0.0
 */
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import { AtomicFile } from "@skein/kernel"
import { Effect, Option, Schema } from "effect"
import * as Path from "node:path"

/**
 * @since 0.0.0
 */
export const fileName = "summary.covered.json"

/**
 * The record's path, given the summary's (`TranscriptLayout.sessionPaths(…).sessionMemorySummary`).
 *
 * @since 0.0.0
 */
export const file = (summaryFile: string): string => Path.join(Path.dirname(summaryFile), fileName)

/**
 * @since 0.0.0
 */
export const Coverage = Schema.Struct({
  /** The uuid of the last transcript entry the summary was written from. */
  lastSummarizedMessageId: Schema.String
})

/**
 * @since 0.0.0
 */
export type Coverage = typeof Coverage.Type

const decode = Schema.decodeUnknownOption(Schema.parseJson(Coverage))

/**
 * The recorded point; none when there is no record or it does not decode
 * (then the summary is taken to cover the whole view, as the CLI does for a
 * summary it did not write in this process).
 *
 * @since 0.0.0
 */
export const read = (summaryFile: string): Effect.Effect<Option.Option<string>, never, FileSystem.FileSystem> =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFileString(file(summaryFile))).pipe(
    Effect.map((text) => Option.map(decode(text), (coverage) => coverage.lastSummarizedMessageId)),
    Effect.orElseSucceed(() => Option.none<string>())
  )

/**
 * Records that the summary covers the view up to `uuid`. The folder exists
 * (the summary is in it).
 *
 * @since 0.0.0
 */
export const write = (summaryFile: string, uuid: string): Effect.Effect<void, PlatformError, FileSystem.FileSystem> =>
  AtomicFile.write(file(summaryFile), JSON.stringify({ lastSummarizedMessageId: uuid } satisfies Coverage) + "\n")
