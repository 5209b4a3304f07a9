/**
 * A prompt's file parts as Claude Code content, against the real file
 * system: data and file URLs, directories, confinement to the session's
 * directory, and the files that are refused (with a message, not dropped).
 * The live test sends them through the server to the real CLI.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it, layer } from "@effect/vitest"
import { createOpencodeClient } from "@opencode-ai/sdk/v2"
import { FakeModel } from "@skein/testkit"
import { Effect, Option } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"
import { contentOf, maxFileBytes } from "../src/internal/promptContent.js"
import * as Harness from "./harness.js"

/** A 1×1 transparent PNG. */
const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="

const sandbox = () => {
  const root = Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-prompt-content-")))
  const dir = Path.join(root, "project")
  Fs.mkdirSync(Path.join(dir, "src"), { recursive: true })
  Fs.writeFileSync(Path.join(dir, "notes.md"), "# Notes\nkumquat\n")
  Fs.writeFileSync(Path.join(dir, "src", "a.ts"), "export const a = 1\n")
  Fs.writeFileSync(Path.join(root, "secret.txt"), "outside\n")
  Fs.symlinkSync(Path.join(root, "secret.txt"), Path.join(dir, "escape.txt"))
  return { root, dir }
}

const file = (mime: string, url: string, filename?: string) => ({ type: "file" as const, mime, url, ...(filename === undefined ? {} : { filename }) })

const messageOf = <R>(effect: Effect.Effect<unknown, { readonly data: { readonly message?: string | undefined } }, R>) =>
  Effect.map(Effect.flip(effect), (e) => e.data.message ?? "")

layer(NodeContext.layer)("promptContent", (it) => {
  it.effect("text, a PNG, a PDF and a text file as data URLs; parts with no Claude Code meaning left out", () =>
    Effect.gen(function*() {
      const { dir } = sandbox()
      const blocks = yield* contentOf([
        { type: "text", text: "Look:" },
        file("image/png", `data:image/png;base64,${png}`, "dot.png"),
        file("application/pdf", `data:application/pdf;base64,${Buffer.from("%PDF-1.4 fake").toString("base64")}`, "a.pdf"),
        file("text/plain", `data:text/plain,${encodeURIComponent("héllo, world")}`, "hello.txt"),
        { type: "agent" }
      ], dir)
      expect(blocks).toEqual([
        { type: "text", text: "Look:" },
        { type: "image", source: { type: "base64", media_type: "image/png", data: png } },
        { type: "document", title: "a.pdf", source: { type: "base64", media_type: "application/pdf", data: Buffer.from("%PDF-1.4 fake").toString("base64") } },
        { type: "document", title: "hello.txt", source: { type: "text", media_type: "text/plain", data: "héllo, world" } }
      ])
    }))

  it.effect("a file URL inside the session's directory is read there; a directory is its entries", () =>
    Effect.gen(function*() {
      const { dir } = sandbox()
      const blocks = yield* contentOf([
        file("text/markdown; charset=utf-8", Url.pathToFileURL(Path.join(dir, "notes.md")).href, "notes.md"),
        file("application/x-directory", Url.pathToFileURL(dir).href, "project")
      ], dir)
      expect(blocks).toEqual([
        { type: "document", title: "notes.md", source: { type: "text", media_type: "text/plain", data: "# Notes\nkumquat\n" } },
        { type: "document", title: "project", source: { type: "text", media_type: "text/plain", data: "escape.txt\nnotes.md\nsrc" } }
      ])
    }))

  it.effect("refused with a message: outside the directory (also through a symlink), other schemes, unreadable types, missing fields, too large", () =>
    Effect.gen(function*() {
      const { dir, root } = sandbox()
      const refused = (part: Parameters<typeof contentOf>[0][number]) => messageOf(contentOf([part], dir))
      expect(yield* refused(file("text/plain", Url.pathToFileURL(Path.join(root, "secret.txt")).href, "secret.txt")))
        .toBe("file part secret.txt: outside the session's directory")
      expect(yield* refused(file("text/plain", Url.pathToFileURL(Path.join(dir, "escape.txt")).href, "escape.txt")))
        .toBe("file part escape.txt: outside the session's directory")
      expect(yield* refused(file("text/plain", Url.pathToFileURL(Path.join(dir, "nope.txt")).href, "nope.txt")))
        .toBe("file part nope.txt: no such file")
      expect(yield* refused(file("image/png", "https://example.com/a.png", "a.png")))
        .toBe("file part a.png: https: URL is not supported (data: and file: are)")
      expect(yield* refused(file("application/zip", "data:application/zip;base64,UEsDBA==", "a.zip")))
        .toBe("file part a.zip: Claude Code cannot read application/zip")
      expect(yield* refused({ type: "file" })).toBe("a file part needs `mime` and `url`")
      const big = Path.join(dir, "big.txt")
      Fs.writeFileSync(big, "")
      Fs.truncateSync(big, maxFileBytes + 1)
      expect(yield* refused(file("text/plain", Url.pathToFileURL(big).href, "big.txt")))
        .toBe(`file part big.txt: larger than ${maxFileBytes} bytes`)
    }))
})

describe("file parts through skein serve to the real CLI", () => {
  it.scopedLive("an image and a text file reach the model's request as image and document blocks", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.text("I see a dot and your notes.")] })
      const server = yield* Harness.start(model)
      Fs.writeFileSync(Path.join(server.dirs.cwd, "notes.md"), "kumquat\n")
      const client = createOpencodeClient({ baseUrl: server.url, headers: server.headers, directory: server.dirs.cwd })
      const { messages, reply } = yield* Effect.promise(async () => {
        const session = (await client.session.create({})).data!
        const reply = await client.session.prompt({
          sessionID: session.id,
          parts: [
            { type: "text", text: "What do you see?" },
            { type: "file", mime: "image/png", url: `data:image/png;base64,${png}`, filename: "dot.png" },
            { type: "file", mime: "text/markdown", url: Url.pathToFileURL(Path.join(server.dirs.cwd, "notes.md")).href, filename: "notes.md" }
          ]
        })
        return { reply, messages: (await client.session.messages({ sessionID: session.id })).data! }
      })
      expect(reply.data?.parts.flatMap((p) => (p.type === "text" ? [p.text] : []))).toEqual(["I see a dot and your notes."])
      const request = yield* model.awaitRequest(0, FakeModel.isConversation)
      const user = Option.getOrThrow(request.messagesRequest).messages.findLast((m) => m.role === "user")
      const content = typeof user?.content === "string" ? [] : user?.content ?? []
      expect(content).toEqual(expect.arrayContaining([
        expect.objectContaining({ type: "image", source: { type: "base64", media_type: "image/png", data: png } }),
        expect.objectContaining({ type: "document", title: "notes.md", source: { type: "text", media_type: "text/plain", data: "kumquat\n" } })
      ]))
      // The history shows the attachments as file parts, their content in data URLs.
      const prompt = messages.find((m) => m.info.role === "user")!
      expect(prompt.parts.map((p) => p.type === "file" ? { type: p.type, mime: p.mime, url: p.url, filename: p.filename } : { type: p.type })).toEqual([
        { type: "text" },
        { type: "file", mime: "image/png", url: `data:image/png;base64,${png}`, filename: undefined },
        { type: "file", mime: "text/plain", url: `data:text/plain;base64,${Buffer.from("kumquat\n").toString("base64")}`, filename: "notes.md" }
      ])
      // And a refused file answers 400 with its reason, sending nothing to the CLI.
      const refused = yield* Effect.promise(() =>
        fetch(`${server.url}/session/${reply.data!.info.sessionID}/message?directory=${encodeURIComponent(server.dirs.cwd)}`, {
          method: "POST",
          headers: { ...server.headers, "content-type": "application/json" },
          body: JSON.stringify({ parts: [{ type: "file", mime: "text/plain", url: "file:///etc/passwd", filename: "passwd" }] })
        }).then(async (r) => ({ status: r.status, body: await r.json() }))
      )
      expect(refused).toEqual({ status: 400, body: { name: "BadRequest", data: { message: "file part passwd: outside the session's directory" } } })
    }))
})
