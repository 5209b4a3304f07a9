/**
 * A prompt's parts as the content of a Claude Code user message. Text is
 * text. A file part becomes what the model can read: an image (PNG, JPEG,
 * GIF, WebP), a PDF document, or a plain-text document titled with its name;
 * a directory, the list of its entries. Its `url` is a `data:` URL, or a
 * `file:` URL inside the session's directory, read there. A file that cannot
 * be sent is refused with a 400 naming it, never dropped. Part types with no
 * Claude Code meaning (`agent`, `subtask`) are left out, as before.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import type { Anthropic } from "@skein/protocol"
import * as Effect from "effect/Effect"
import * as Path from "node:path"
import * as Url from "node:url"
import { type BadRequest, badRequest, type FilePartInput, type PromptBody } from "../ServeApi.js"

type Part = typeof PromptBody.Type["parts"][number]

/** Anthropic's limit on a PDF (and well above its image limit): bigger files are refused here, not by the API mid-turn. */
export const maxFileBytes = 32 * 1024 * 1024

const imageTypes: ReadonlySet<string> = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"])

const textTypes: ReadonlySet<string> = new Set([
  "application/json",
  "application/xml",
  "application/javascript",
  "application/typescript",
  "application/x-yaml",
  "application/yaml",
  "application/toml",
  "application/x-sh",
  "application/sql",
  "image/svg+xml"
])

const isText = (mime: string) => mime.startsWith("text/") || textTypes.has(mime) || /\+(json|xml)$/.test(mime)

/** The bare media type: lower case, without parameters (`; charset=…`). */
const bare = (mime: string) => mime.split(";")[0]!.trim().toLowerCase()

interface FileBytes {
  readonly mime: string
  readonly name: string
  readonly bytes: Uint8Array
}

const refuse = (name: string, why: string) => Effect.fail(badRequest(`file part ${name}: ${why}`))

/** `data:[<type>][;base64],<data>`; the part's own `mime` wins over the URL's. */
const fromDataUrl = (url: string, mime: string, name: string): Effect.Effect<FileBytes, BadRequest> => {
  const comma = url.indexOf(",")
  if (comma < 0) return refuse(name, "a data URL without a comma")
  const header = url.slice("data:".length, comma)
  const payload = url.slice(comma + 1)
  const base64 = header.split(";").some((p) => p.trim().toLowerCase() === "base64")
  return Effect.try({
    try: () => base64 ? Buffer.from(payload, "base64") : Buffer.from(decodeURIComponent(payload), "utf8"),
    catch: () => badRequest(`file part ${name}: its data URL does not decode`)
  }).pipe(Effect.map((bytes) => ({ mime: bare(mime || header.split(";")[0] || "text/plain"), name, bytes })))
}

/** The physical path, inside the session's directory (a symlink out of it is outside). */
const confined = (fs: FileSystem.FileSystem, directory: string, path: string, name: string) =>
  Effect.gen(function*() {
    const real = yield* Effect.mapError(fs.realPath(path), () => badRequest(`file part ${name}: no such file`))
    const root = yield* Effect.orElseSucceed(fs.realPath(directory), () => directory)
    const inside = real === root || real.startsWith(root.endsWith(Path.sep) ? root : root + Path.sep)
    return inside ? real : yield* Effect.fail(badRequest(`file part ${name}: outside the session's directory`))
  })

/** A `file:` URL: its bytes, or for a directory the list of its entries. */
const fromFileUrl = (url: string, mime: string, name: string, directory: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Effect.try({ try: () => Url.fileURLToPath(url), catch: () => badRequest(`file part ${name}: not a file URL`) })
    const real = yield* confined(fs, directory, path, name)
    const info = yield* Effect.mapError(fs.stat(real), () => badRequest(`file part ${name}: cannot be read`))
    if (info.type === "Directory") {
      const entries = yield* Effect.mapError(fs.readDirectory(real), () => badRequest(`file part ${name}: cannot be listed`))
      return { mime: "text/plain", name, bytes: new TextEncoder().encode([...entries].sort().join("\n")) } satisfies FileBytes
    }
    if (Number(info.size) > maxFileBytes) return yield* refuse(name, `larger than ${maxFileBytes} bytes`)
    const bytes = yield* Effect.mapError(fs.readFile(real), () => badRequest(`file part ${name}: cannot be read`))
    return { mime: bare(mime), name, bytes } satisfies FileBytes
  })

/** The block the model reads a file as; a type it cannot read is refused. */
const blockOf = (file: FileBytes): Effect.Effect<Anthropic.ContentBlock, BadRequest> => {
  if (file.bytes.length > maxFileBytes) return refuse(file.name, `larger than ${maxFileBytes} bytes`)
  const data = () => Buffer.from(file.bytes).toString("base64")
  if (imageTypes.has(file.mime)) {
    return Effect.succeed({ type: "image", source: { type: "base64", media_type: file.mime, data: data() } })
  }
  if (file.mime === "application/pdf") {
    return Effect.succeed({ type: "document", title: file.name, source: { type: "base64", media_type: "application/pdf", data: data() } })
  }
  if (isText(file.mime) || file.mime === "application/x-directory") {
    const text = new TextDecoder().decode(file.bytes)
    return Effect.succeed({ type: "document", title: file.name, source: { type: "text", media_type: "text/plain", data: text } })
  }
  return refuse(file.name, `Claude Code cannot read ${file.mime}`)
}

const fileBlock = (part: typeof FilePartInput.Type, directory: string) => {
  const name = part.filename ?? part.url.slice(0, 64)
  const scheme = part.url.slice(0, part.url.indexOf(":") + 1).toLowerCase()
  const file = scheme === "data:"
    ? fromDataUrl(part.url, part.mime, name)
    : scheme === "file:"
    ? fromFileUrl(part.url, part.mime, name, directory)
    : refuse(name, `${scheme || "a relative"} URL is not supported (data: and file: are)`)
  return Effect.flatMap(file, blockOf)
}

const isFile = (part: Part): part is Extract<Part, { readonly type: "file"; readonly url: string }> =>
  part.type === "file" && "url" in part

/** The user message's content for `parts`, a file's path resolved against `directory`. */
export const contentOf = (
  parts: ReadonlyArray<Part>,
  directory: string
): Effect.Effect<ReadonlyArray<Anthropic.ContentBlock>, BadRequest, FileSystem.FileSystem> =>
  Effect.map(
    Effect.forEach(parts, (part): Effect.Effect<ReadonlyArray<Anthropic.ContentBlock>, BadRequest, FileSystem.FileSystem> => {
      if (part.type === "text" && "text" in part) return Effect.succeed([{ type: "text", text: part.text }])
      if (isFile(part)) return Effect.map(fileBlock(part, directory), (block) => [block])
      if (part.type === "file") return Effect.fail(badRequest("a file part needs `mime` and `url`"))
      return Effect.succeed([])
    }),
    (blocks) => blocks.flat()
  )
