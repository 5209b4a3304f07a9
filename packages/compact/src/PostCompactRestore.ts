/**
 * What the summarizing pass restores after the boundary, in the form the
 * CLI (2.1.332) writes after its own `/compact`: attachment entries that
 * follow the summary (and, on load, the retained window).
 *
 * - **Recently read files**: the files the session read with `Read`, most
 *   recent first, not those whose read is still in the retained window, up
 *   to 5 of them and 50,000 tokens in all; a file over 5,000 tokens, or gone
 *   from disk, is skipped. Each is read again from disk, as the CLI does, and
 *   written as a `file` attachment with the CLI's rendered `Read` call and
 *   numbered result.
 * - **The plan**: the session's latest plan (an `ExitPlanMode` call, or an
 *   earlier `plan_file_reference`), as a `plan_file_reference` with the plan
 *   file's path and its current content.
 * - **Task state**: the latest `task_status` attachment of each task that
 *   was still pending or running.
 *
 * Selection is pure (`select`); `restore` does the reading.
 *
 * @since 0.0.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import type { Lenient, Transcript } from "@skein/protocol"
import { Effect, Option, Schema } from "effect"
import * as Path from "node:path"
import * as TokenCounter from "./TokenCounter.js"

/**
 * @since 0.0.0
 */
export interface RestoreOptions {
  /** Default 5. */
  readonly maxFiles?: number | undefined
  /** All restored files together. Default 50,000. */
  readonly maxTokens?: number | undefined
  /** One file. Default 5,000. */
  readonly maxTokensPerFile?: number | undefined
}

/** @since 0.0.0 */
export const defaults = { maxFiles: 5, maxTokens: 50_000, maxTokensPerFile: 5_000 } as const

const ReadResult = Schema.Struct({
  file: Schema.Struct({ filePath: Schema.String })
})
const decodeReadResult = Schema.decodeUnknownOption(ReadResult)

/** The file a `Read` tool result read, from the entry's `toolUseResult`. */
export const readPath = (entry: Transcript.ChainEntry): Option.Option<string> =>
  entry.type === "user" && entry.toolUseResult !== undefined
    ? Option.map(decodeReadResult(entry.toolUseResult), (r) => r.file.filePath)
    : Option.none()

const ExitPlan = Schema.Struct({ type: Schema.Literal("tool_use"), name: Schema.Literal("ExitPlanMode"), input: Schema.Struct({ plan: Schema.String }) })
const decodeExitPlan = Schema.decodeUnknownOption(ExitPlan)
const PlanReference = Schema.Struct({
  type: Schema.Literal("plan_file_reference"),
  planFilePath: Schema.optional(Schema.String),
  planContent: Schema.String
})
const decodePlanReference = Schema.decodeUnknownOption(PlanReference)
const TaskStatus = Schema.Struct({ type: Schema.Literal("task_status"), taskId: Schema.String, status: Schema.String })
const decodeTaskStatus = Schema.decodeUnknownOption(TaskStatus)
const Slug = Schema.Struct({ slug: Schema.String })
const decodeSlug = Schema.decodeUnknownOption(Slug)

/**
 * @since 0.0.0
 */
export interface Selection {
  /** Paths to restore, most recent first (before the token budget, which needs the files' contents). */
  readonly files: ReadonlyArray<string>
  readonly plan: Option.Option<{ readonly path: string | undefined; readonly content: string }>
  readonly tasks: ReadonlyArray<Lenient.JsonObject>
}

const liveTaskStatuses: ReadonlySet<string> = new Set(["pending", "running"])

/** The latest plan of the chain, and where its file is. */
const latestPlan = (entries: ReadonlyArray<Transcript.ChainEntry>, plansDir: string | undefined): Selection["plan"] => {
  const slug = entries.reduce<string | undefined>((found, e) => Option.getOrElse(Option.map(decodeSlug(e), (s) => s.slug), () => found), undefined)
  const slugPath = slug === undefined || plansDir === undefined ? undefined : Path.join(plansDir, `${slug}.md`)
  for (let i = entries.length - 1; i >= 0; i--) {
    const entry = entries[i]!
    if (entry.type === "attachment") {
      const ref = decodePlanReference(entry.attachment)
      if (Option.isSome(ref)) return Option.some({ path: ref.value.planFilePath || slugPath, content: ref.value.planContent })
    }
    if (entry.type === "assistant") {
      for (const block of entry.message.content) {
        const plan = decodeExitPlan(block)
        if (Option.isSome(plan)) return Option.some({ path: slugPath, content: plan.value.input.plan })
      }
    }
  }
  return Option.none()
}

/**
 * What to restore from a view cut into `dropped` and `window`. Pure.
 *
 * @since 0.0.0
 */
export const select = (input: {
  readonly dropped: ReadonlyArray<Transcript.ChainEntry>
  readonly window: ReadonlyArray<Transcript.ChainEntry>
  /** Paths never restored as files (the plan file, session memory). */
  readonly exclude?: ReadonlyArray<string> | undefined
  /** Where the CLI keeps plan files (`<config>/plans`). */
  readonly plansDir?: string | undefined
  readonly maxFiles?: number | undefined
}): Selection => {
  const all = [...input.dropped, ...input.window]
  const inWindow = new Set(input.window.flatMap((e) => Option.toArray(readPath(e))))
  const excluded = new Set(input.exclude ?? [])
  const plan = latestPlan(all, input.plansDir)
  if (Option.isSome(plan) && plan.value.path !== undefined) excluded.add(plan.value.path)
  const files: Array<string> = []
  for (let i = input.dropped.length - 1; i >= 0 && files.length < (input.maxFiles ?? defaults.maxFiles); i--) {
    const path = readPath(input.dropped[i]!)
    if (Option.isNone(path) || inWindow.has(path.value) || excluded.has(path.value) || files.includes(path.value)) continue
    files.push(path.value)
  }
  const tasks = new Map<string, Lenient.JsonObject>()
  for (const entry of input.dropped) {
    if (entry.type !== "attachment") continue
    const status = decodeTaskStatus(entry.attachment)
    if (Option.isSome(status)) tasks.set(status.value.taskId, entry.attachment)
  }
  const live = [...tasks.values()].filter((t) => Option.exists(decodeTaskStatus(t), (s) => liveTaskStatuses.has(s.status)))
  return { files, plan, tasks: live }
}

/**
 * An attachment entry's body (everything but the chain fields), as the CLI writes it.
 *
 * @since 0.0.0
 */
export type Restored = Lenient.JsonObject

/**
 * A `file` attachment of a text file, with the rendered `Read` call and its
 * numbered result. Pure.
 *
 * @since 0.0.0
 */
export const fileAttachment = (filePath: string, content: string, cwd: string): Restored => {
  const lines = content.split("\n")
  const numbered = lines.map((line, i) => `${i + 1}\t${line}`).join("\n")
  return {
    attachment: {
      type: "file",
      filename: filePath,
      content: {
        type: "text",
        file: { filePath, content, numLines: lines.length, startLine: 1, totalLines: lines.length }
      },
      displayPath: Path.relative(cwd, filePath),
      savedCopyFraming: { enveloped: false }
    },
    rendered: [
      {
        content: `<system-reminder>\nCalled the Read tool with the following input: ${JSON.stringify({ file_path: filePath })}\n</system-reminder>`
      },
      { content: `<system-reminder>\nResult of calling the Read tool:\n${numbered}\n</system-reminder>` }
    ],
    renderedRole: "user"
  }
}

/** @since 0.0.0 */
export const planAttachment = (path: string | undefined, content: string): Restored => ({
  attachment: { type: "plan_file_reference", planFilePath: path ?? "", planContent: content }
})

/**
 * Reads the selected files and builds the attachments: files first (within
 * the budgets), then the plan, then the tasks.
 *
 * @since 0.0.0
 */
export const restore = Effect.fn("PostCompactRestore.restore")(function*(
  selection: Selection,
  options: RestoreOptions & { readonly cwd: string }
) {
  const fs = yield* FileSystem.FileSystem
  const perFile = options.maxTokensPerFile ?? defaults.maxTokensPerFile
  let budget = options.maxTokens ?? defaults.maxTokens
  const out: Array<Restored> = []
  for (const path of selection.files) {
    const content = yield* fs.readFileString(path).pipe(Effect.option)
    if (Option.isNone(content)) continue
    const tokens = TokenCounter.estimateText(content.value)
    if (tokens > perFile || tokens > budget) continue
    budget -= tokens
    out.push(fileAttachment(path, content.value, options.cwd))
  }
  if (Option.isSome(selection.plan)) {
    const { content, path } = selection.plan.value
    // The file is the plan's truth when it is still there, as for the CLI.
    const current = path === undefined ? Option.none() : yield* fs.readFileString(path).pipe(Effect.option)
    out.push(planAttachment(path, Option.getOrElse(current, () => content)))
  }
  for (const task of selection.tasks) out.push({ attachment: task })
  return out
})
