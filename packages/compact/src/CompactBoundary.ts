/**
 * The entries a compaction appends, in the CLI's own format (2.1.332, as it
 * writes them after its own `/compact`):
 *
 * 1. a `system` / `compact_boundary` entry with `parentUuid: null`,
 *    `logicalParentUuid` the old leaf, and `compactMetadata` (`trigger`,
 *    `preTokens`, `postTokens`, and the retained window as a preserved
 *    segment: its head, its tail, and the summary as the anchor);
 * 2. the summary, a `user` entry with `isCompactSummary`;
 * 3. what the pass restores (`PostCompactRestore`: recently read files, the
 *    plan, task state), as `attachment` entries chained after the summary:
 *    on load they follow the retained window, as after the CLI's `/compact`;
 * 4. `last-prompt` naming the leaf (the last restored entry, or the window's
 *    tail); the writer then re-appends the latest metadata, so that tail
 *    scans find it.
 *
 * The retained window is not copied: as with the CLI's own compaction it
 * stays where it is, and a resume (the CLI's, or `ResumeLoader`) loads it
 * from before the boundary, hangs it under the summary and resets its usage
 * counters. So no old line is touched, and the whole change is one append:
 * a crash leaves either the old view or, once the boundary and summary
 * lines are complete, the new one (`TranscriptStore` cuts a torn last line).
 *
 * @since 0.0.0
 */
import type { Lenient } from "@skein/protocol"
import type { TranscriptStore } from "@skein/store"
import { Effect } from "effect"
import type { Plan } from "./SessionMemoryCompaction.js"

/**
 * What the boundary says about where and by whom it was written.
 *
 * @since 0.0.0
 */
export interface Context {
  readonly sessionId: string
  readonly cwd: string
  readonly trigger: "manual" | "auto"
  /** The CLI version the session runs; copied into the entries as the CLI does. */
  readonly version?: string | undefined
  readonly gitBranch?: string | undefined
  /** The last prompt, for `last-prompt` (kept from the transcript's metadata). */
  readonly lastPrompt?: string | undefined
  /** Extra `compactMetadata` fields (e.g. `preCompactDiscoveredTools`). */
  readonly metadata?: Lenient.JsonObject | undefined
  readonly now: Date
  readonly uuid: () => string
}

/**
 * The summary as the resumed model reads it: a preamble, the summary, and
 * what the messages after it are.
 *
 * @since 0.0.0
 */
export const summaryText = (summary: string): string =>
  [
    "This session continues an earlier conversation whose context was compacted.",
    "The summary below stands for the earlier part of it.",
    "",
    "Summary:",
    summary.trim(),
    "",
    "The messages after this summary were kept verbatim from before the compaction; they are the most recent ones.",
    "Continue the work from where it stopped, without recapping the summary."
  ].join("\n")

/**
 * The appended entries, in order.
 *
 * @since 0.0.0
 */
export interface Entries {
  readonly boundaryUuid: string
  readonly summaryUuid: string
  readonly boundary: Lenient.JsonObject
  readonly summary: Lenient.JsonObject
  /** Restored attachments, chained after the summary. */
  readonly restored: ReadonlyArray<Lenient.JsonObject>
  readonly lastPrompt: Lenient.JsonObject
}

/**
 * Builds the entries of a planned compaction. Pure.
 *
 * @since 0.0.0
 */
export const entries = (
  plan: Plan,
  context: Context,
  /** Attachment bodies (`PostCompactRestore.Restored`) to chain after the summary. */
  restore: ReadonlyArray<Lenient.JsonObject> = []
): Entries => {
  const head = plan.window[0]
  const tail = plan.window[plan.window.length - 1]
  const boundaryUuid = context.uuid()
  const summaryUuid = context.uuid()
  const timestamp = context.now.toISOString()
  const common = {
    isSidechain: false,
    userType: "external",
    entrypoint: "sdk-cli",
    cwd: context.cwd,
    sessionId: context.sessionId,
    ...(context.version === undefined ? {} : { version: context.version }),
    ...(context.gitBranch === undefined ? {} : { gitBranch: context.gitBranch })
  }
  const uuids = plan.window.map((entry) => entry.uuid)
  const boundary: Lenient.JsonObject = {
    parentUuid: null,
    logicalParentUuid: plan.oldLeafUuid,
    type: "system",
    subtype: "compact_boundary",
    content: "Conversation compacted",
    isMeta: false,
    timestamp,
    uuid: boundaryUuid,
    level: "info",
    compactMetadata: {
      trigger: context.trigger,
      preTokens: plan.preTokens,
      postTokens: plan.postTokens,
      ...(head === undefined || tail === undefined ? {} : {
        preservedSegment: { headUuid: head.uuid, anchorUuid: summaryUuid, tailUuid: tail.uuid },
        preservedMessages: { anchorUuid: summaryUuid, uuids, allUuids: uuids }
      }),
      ...context.metadata
    },
    ...common
  }
  const summary: Lenient.JsonObject = {
    parentUuid: boundaryUuid,
    type: "user",
    message: { role: "user", content: plan.summary },
    isVisibleInTranscriptOnly: true,
    isCompactSummary: true,
    uuid: summaryUuid,
    timestamp,
    ...common
  }
  let parent = summaryUuid
  const restored = restore.map((body): Lenient.JsonObject => {
    const uuid = context.uuid()
    const entry = { parentUuid: parent, ...body, type: "attachment", uuid, timestamp, ...common }
    parent = uuid
    return entry
  })
  const leaf = restored.length > 0 ? parent : tail?.uuid ?? summaryUuid
  // Always written: without it a resume would take the summary, the last new entry, as the leaf.
  const lastPrompt: Lenient.JsonObject = {
    type: "last-prompt",
    lastPrompt: context.lastPrompt ?? "",
    leafUuid: leaf,
    sessionId: context.sessionId
  }
  return { boundaryUuid, summaryUuid, boundary, summary, restored, lastPrompt }
}

/**
 * Appends the entries through a transcript writer, in one write; the
 * writer re-appends the latest metadata after the summary.
 *
 * @since 0.0.0
 */
export const append = Effect.fn("CompactBoundary.append")(function*(
  writer: TranscriptStore.Writer,
  written: Entries
) {
  yield* writer.appendAll([written.boundary, written.summary, ...written.restored, written.lastPrompt])
  yield* writer.flush
})
