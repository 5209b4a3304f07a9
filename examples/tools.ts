/**
 * Host-defined tools: a session whose model calls two tools that live in this
 * process, served to Claude Code as one in-process MCP server.
 *
 *   npx tsx examples/tools.ts
 *
 * - `word_count` is pure: it counts the words of the text it is given.
 * - `read_note` reads a file from a notes folder through @effect/platform's
 *   FileSystem, which the toolkit's layer provides (any service would do: a
 *   database client, an HTTP client, …).
 *
 * The CLI names them `mcp__notes__word_count` and `mcp__notes__read_note`;
 * the session allows exactly those (`allowedTools`), so no permission prompt
 * is needed. Arguments are decoded by each tool's input schema: the model's
 * second call passes a bad argument and gets a tool error naming the field.
 *
 * Offline and hermetic: the real CLI talks only to an embedded FakeModel on
 * 127.0.0.1, with a private config folder, working directory and TMPDIR.
 * Closing the scope stops the CLI and removes the folders.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { ProcessHost } from "@skein/kernel"
import { Anthropic } from "@skein/protocol"
import { Session, Tool, Toolkit } from "@skein/session"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Console, Context, Effect, Layer, Option, Schema } from "effect"

const wordCount = Tool.make({
  name: "word_count",
  description: "Counts the words of a text",
  input: Schema.Struct({ text: Schema.String.annotations({ description: "The text to count" }) }),
  output: Schema.Struct({ words: Schema.Number }),
  run: ({ text }) => Effect.succeed({ words: text.split(/\s+/).filter((w) => w.length > 0).length })
})

/** Where `read_note` reads: a service of the embedding program, provided to the toolkit's layer. */
class NotesDir extends Context.Tag("examples/NotesDir")<NotesDir, { readonly path: string }>() {}

const readNote = Tool.make({
  name: "read_note",
  description: "Reads one note by its file name",
  input: Schema.Struct({ name: Schema.String.pipe(Schema.pattern(/^[\w-]+\.md$/)).annotations({ description: "e.g. groceries.md" }) }),
  run: ({ name }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const dir = yield* NotesDir
      return yield* fs.readFileString(path.join(dir.path, name))
    }).pipe(Effect.mapError((e) => new Tool.ToolError({ message: `cannot read ${name}: ${e.message}` })))
})

const notes = Toolkit.make("notes", [wordCount, readNote])

const script: ReadonlyArray<FakeModel.Reply> = [
  FakeModel.toolUse("mcp__notes__read_note", { name: "groceries.md" }),
  FakeModel.toolUse("mcp__notes__word_count", { text: "apples, bread, coffee beans and two lemons" }),
  FakeModel.toolUse("mcp__notes__word_count", { text: 42 }),
  FakeModel.text("Your grocery note lists apples, bread, coffee beans and two lemons: seven words.")
]

const toolResults = (request: FakeModel.RecordedRequest): ReadonlyArray<string> =>
  Option.match(request.messagesRequest, {
    onNone: () => [],
    onSome: (body) => {
      const last = body.messages.at(-1)
      if (last === undefined || typeof last.content === "string") return []
      return last.content.flatMap((block) =>
        Anthropic.isKnownBlock(block) && block.type === "tool_result" ? [JSON.stringify(block.content)] : []
      )
    }
  })

const main = Effect.gen(function*() {
  const model = yield* FakeModel.make({ replies: script })
  const d = yield* ClaudeCli.offlineDirs("skein-tools-")
  const fs = yield* FileSystem.FileSystem
  const notesDir = `${d.root}/notes`
  yield* fs.makeDirectory(notesDir, { recursive: true })
  yield* fs.writeFileString(`${notesDir}/groceries.md`, "apples, bread, coffee beans and two lemons\n")

  const session = yield* Session.start({
    cwd: d.cwd,
    configDir: d.configDir,
    env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: d.configDir, tmpDir: d.tmpDir }),
    bare: true,
    allowedTools: Toolkit.toolNames(notes)
  }).pipe(
    Effect.provide(Toolkit.layer(notes).pipe(Layer.provide(Layer.succeed(NotesDir, { path: notesDir }))))
  )
  const summary = yield* Effect.flatMap(session.send("What is on my grocery note, and how long is it?"), (turn) => turn.result)

  const requests = (yield* model.requests).filter(FakeModel.isConversation)
  for (const request of requests) {
    for (const result of toolResults(request)) yield* Console.log(`the model received: ${result}`)
  }
  yield* Console.log(`\nassistant: ${summary.text}`)
  const received = requests.flatMap(toolResults).join("\n")
  if (!received.includes("coffee beans") || !received.includes("\\\"words\\\": 7") || !received.includes("text: Expected string")) {
    return yield* Effect.dieMessage("tools check failed")
  }
})

main.pipe(
  Effect.scoped,
  Effect.provide(Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer)),
  NodeRuntime.runMain
)
