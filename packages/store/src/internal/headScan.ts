/**
 * What a transcript's first lines say: the first prompt a person typed, the
 * cwd and the git branch. Read 64 KiB at a time and never more than 4 MiB,
 * so a listing costs little however long the transcript.
 */
import type { PlatformError } from "@effect/platform/Error"
import type * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Option } from "effect"

export interface Head {
  readonly firstPrompt: string | undefined
  readonly cwd: string | undefined
  readonly gitBranch: string | undefined
}

const promptText = (content: unknown): string | undefined => {
  if (typeof content === "string") return content
  if (Array.isArray(content)) {
    for (const block of content) {
      if (typeof block === "object" && block !== null && "type" in block && block.type === "text" && "text" in block) {
        if (typeof block.text === "string") return block.text
      }
    }
  }
  return undefined
}

/** A prompt a person typed, as opposed to command echoes and injected context. */
const isTypedPrompt = (text: string): boolean => text.trim().length > 0 && !text.startsWith("<")

const headScanBytes = 64 * 1024
const headScanLimit = 4 * 1024 * 1024

/** The typed prompt of a line that is a user entry (not meta, not a compact summary), if any. */
const typedPrompt = (json: object): string | undefined => {
  if (
    "type" in json && json.type === "user" && !("isMeta" in json && json.isMeta === true) &&
    !("isCompactSummary" in json && json.isCompactSummary === true) && "message" in json &&
    typeof json.message === "object" && json.message !== null && "content" in json.message
  ) {
    const text = promptText(json.message.content)
    if (text !== undefined && isTypedPrompt(text)) return text
  }
  return undefined
}

export const headScan = (fs: FileSystem.FileSystem, path: string): Effect.Effect<Head, PlatformError> =>
  Effect.scoped(Effect.gen(function*() {
    const file = yield* fs.open(path, { flag: "r" })
    let cwd: string | undefined
    let gitBranch: string | undefined
    let pending = Buffer.alloc(0)
    let read = 0
    while (read < headScanLimit) {
      const chunk = Option.getOrUndefined(yield* file.readAlloc(headScanBytes))
      if (chunk === undefined || chunk.length === 0) break
      read += chunk.length
      const buf = Buffer.concat([pending, chunk])
      let start = 0
      let end = buf.indexOf(0x0a, start)
      while (end !== -1) {
        const text = buf.subarray(start, end).toString("utf8")
        start = end + 1
        end = buf.indexOf(0x0a, start)
        let json: unknown
        try {
          json = JSON.parse(text)
        } catch {
          continue
        }
        if (typeof json !== "object" || json === null) continue
        if (cwd === undefined && "cwd" in json && typeof json.cwd === "string") cwd = json.cwd
        if (gitBranch === undefined && "gitBranch" in json && typeof json.gitBranch === "string") {
          gitBranch = json.gitBranch
        }
        const firstPrompt = typedPrompt(json)
        if (firstPrompt !== undefined) return { firstPrompt, cwd, gitBranch }
      }
      pending = buf.subarray(start)
    }
    return { firstPrompt: undefined, cwd, gitBranch }
  }))
