/**
 * One memory file and one index line, in the Claude Code CLI's own format
 * (2.1.332), so that what skein writes is what the next plain `claude`
 * session loads.
 *
 * The CLI's system prompt asks for one fact per file, with frontmatter
 * `name` (a short kebab-case slug), `description` (one line, used for recall)
 * and `metadata.type` (user, feedback, project or reference), and one
 * pointer per memory in `MEMORY.md`: `- [Title](file.md) — hook`. Only the
 * index is loaded into a session's context, so it must stay short.
 *
 * Pure: parsing and rendering only; the folder is `MemoryFolder`.
 *
 * @since 0.0.0
 */
import { Either, Schema } from "effect"

/**
 * @since 0.0.0
 */
export const MemoryType = Schema.Literal("user", "feedback", "project", "reference")

/**
 * @since 0.0.0
 */
export type MemoryType = Schema.Schema.Type<typeof MemoryType>

/**
 * A short kebab-case slug, as the CLI asks `name` to be.
 *
 * @since 0.0.0
 */
export const Slug = Schema.String.pipe(Schema.pattern(/^[a-z0-9]+(?:-[a-z0-9]+)*$/), Schema.brand("MemorySlug"))

/**
 * @since 0.0.0
 */
export type Slug = Schema.Schema.Type<typeof Slug>

const OneLine = Schema.String.pipe(Schema.nonEmptyString(), Schema.pattern(/^[^\r\n]*$/))

/**
 * @since 0.0.0
 */
export const Memory = Schema.Struct({
  name: Slug,
  description: OneLine,
  type: MemoryType,
  /** The fact, after the frontmatter. */
  body: Schema.String
})

/**
 * @since 0.0.0
 */
export interface Memory extends Schema.Schema.Type<typeof Memory> {}

/**
 * A file that is not a memory the CLI would understand.
 *
 * @since 0.0.0
 */
export class MemoryFormatError extends Schema.TaggedError<MemoryFormatError>()("MemoryFormatError", {
  file: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `${this.file}: ${this.reason}`
  }
}

/**
 * The file name a memory gets by default: its slug.
 *
 * @since 0.0.0
 */
export const fileName = (memory: { readonly name: Slug }): string => `${memory.name}.md`

/** YAML scalars the way the CLI writes them: plain, or quoted when they would not read back. */
const scalar = (value: string): string =>
  /^[\w][\w .,;()/'-]*$/.test(value) && !/:\s/.test(value) ? value : JSON.stringify(value)

const unquote = (raw: string): string => {
  const value = raw.trim()
  if (value.startsWith("\"") && value.endsWith("\"") && value.length >= 2) {
    const parsed = Either.try(() => JSON.parse(value))
    return Either.isRight(parsed) && typeof parsed.right === "string" ? parsed.right : value.slice(1, -1)
  }
  if (value.startsWith("'") && value.endsWith("'") && value.length >= 2) return value.slice(1, -1).replaceAll("''", "'")
  return value
}

/**
 * @since 0.0.0
 */
export const render = (memory: Memory): string =>
  [
    "---",
    `name: ${memory.name}`,
    `description: ${scalar(memory.description)}`,
    "metadata:",
    `  type: ${memory.type}`,
    "---",
    "",
    memory.body.trimEnd(),
    ""
  ].join("\n")

const decodeMemory = Schema.decodeUnknownEither(Memory)

/** The frontmatter's keys: top-level ones, and `metadata.<key>` for the nested block. */
const frontmatterFields = (lines: ReadonlyArray<string>): Map<string, string> => {
  const fields = new Map<string, string>()
  let block: string | undefined
  for (const line of lines) {
    const nested = /^\s+([A-Za-z_][\w-]*):\s*(.*)$/.exec(line)
    if (nested !== null && block !== undefined) {
      fields.set(`${block}.${nested[1]}`, unquote(nested[2] ?? ""))
      continue
    }
    const top = /^([A-Za-z_][\w-]*):\s*(.*)$/.exec(line)
    if (top === null) continue
    const value = top[2] ?? ""
    block = value.trim() === "" ? top[1] : undefined
    if (block === undefined) fields.set(top[1] ?? "", unquote(value))
  }
  return fields
}

/**
 * Reads a memory file. A file without frontmatter, or whose fields do not
 * decode, is a `MemoryFormatError` naming what is wrong.
 *
 * @since 0.0.0
 */
export const parse = (file: string, text: string): Either.Either<Memory, MemoryFormatError> => {
  const lines = text.replace(/^\uFEFF/, "").split(/\r?\n/)
  if (lines[0]?.trim() !== "---") return Either.left(new MemoryFormatError({ file, reason: "no frontmatter" }))
  const end = lines.findIndex((line, i) => i > 0 && line.trim() === "---")
  if (end === -1) return Either.left(new MemoryFormatError({ file, reason: "unterminated frontmatter" }))
  const fields = frontmatterFields(lines.slice(1, end))
  const body = lines.slice(end + 1).join("\n").replace(/^\n+/, "").trimEnd()
  return decodeMemory({
    name: fields.get("name"),
    description: fields.get("description"),
    type: fields.get("metadata.type") ?? fields.get("type"),
    body
  }).pipe(
    Either.mapLeft((error) => new MemoryFormatError({ file, reason: error.message.split("\n").slice(0, 3).join(" ") }))
  )
}

// ---------------------------------------------------------------------------
// Index lines
// ---------------------------------------------------------------------------

/**
 * One pointer of `MEMORY.md`.
 *
 * @since 0.0.0
 */
export interface Entry {
  readonly title: string
  readonly file: string
  readonly hook: string
}

/**
 * A line of `MEMORY.md`: a pointer, a blank line or heading (kept as is), or
 * anything else (kept, and reported by `MemoryIndex.validate`).
 *
 * @since 0.0.0
 */
export type IndexLine =
  | { readonly _tag: "Entry"; readonly entry: Entry; readonly raw: string }
  | { readonly _tag: "Blank"; readonly raw: string }
  | { readonly _tag: "Other"; readonly raw: string }

const entryLine = /^\s*[-*]\s+\[([^\]]+)\]\(([^)\s]+)\)\s*(?:[—–-]+\s*(.*))?$/

/**
 * @since 0.0.0
 */
export const parseLine = (raw: string): IndexLine => {
  if (raw.trim() === "" || raw.trimStart().startsWith("#")) return { _tag: "Blank", raw }
  const match = entryLine.exec(raw)
  if (match === null) return { _tag: "Other", raw }
  return { _tag: "Entry", raw, entry: { title: match[1] ?? "", file: match[2] ?? "", hook: (match[3] ?? "").trim() } }
}

/**
 * `- [Title](file.md) — hook`, shortened to `maxChars` by cutting the hook
 * (then the title) with an ellipsis. The link is never cut.
 *
 * @since 0.0.0
 */
export const renderLine = (entry: Entry, maxChars: number): string => {
  const flat = (s: string) => s.replace(/\s+/g, " ").trim()
  const title = flat(entry.title).replace(/[[\]]/g, "")
  const hook = flat(entry.hook)
  const full = hook === "" ? `- [${title}](${entry.file})` : `- [${title}](${entry.file}) — ${hook}`
  if ([...full].length <= maxChars) return full
  const head = `- [${title}](${entry.file}) — `
  const room = maxChars - [...head].length - 1
  if (room >= 8) return head + [...hook].slice(0, room).join("").trimEnd() + "…"
  const bare = `- [](${entry.file})`
  const titleRoom = maxChars - [...bare].length - 1
  return titleRoom >= 4 ? `- [${[...title].slice(0, titleRoom).join("").trimEnd()}…](${entry.file})` : bare
}
