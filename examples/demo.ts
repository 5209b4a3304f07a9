/**
 * The demo behind `npm start`: a scripted tour of one skein session. The real
 * Claude Code CLI runs under `Session.start` against skein's embedded
 * FakeModel, and every message of each turn is printed as it arrives:
 *
 *   1. a text turn, streamed delta by delta;
 *   2. a tool call that needs permission, approved by the host's policy;
 *   3. one the policy denies;
 *   4. a background Bash task, whose late `result` stays in its turn;
 *   5. an interrupt mid-stream, and a turn after it.
 *
 * Offline and hermetic: the CLI talks only to FakeModel on 127.0.0.1, with a
 * private config directory, working directory and TMPDIR, and non-essential
 * traffic off. Closing the scope stops the CLI and removes the directories.
 */
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { ProcessHost } from "@skein/kernel"
import { Anthropic, CliMessage } from "@skein/protocol"
import { Permissions, Session, type Turn } from "@skein/session"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Console, Duration, Effect, Fiber, Layer, Stream } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"

const tty = process.stdout.isTTY === true
const paint = (code: number) => (text: string) => tty ? `\x1b[${code}m${text}\x1b[0m` : text
const dim = paint(2)
const bold = paint(1)
const cyan = paint(36)
const yellow = paint(33)
const red = paint(31)
const green = paint(32)
const magenta = paint(35)

// --- the script FakeModel plays, in order -----------------------------------

const longAnswer = Array.from(
  { length: 12 },
  (_, i) => `Paragraph ${i + 1}: skein keeps one supervised fiber per Claude Code process, and every resource in its scope.`
).join(" ")

const script: ReadonlyArray<FakeModel.Reply> = [
  // 1. text, streamed
  FakeModel.withDelay(
    FakeModel.combine(
      FakeModel.thinking("The user asks about skein. I should explain it briefly: a host for agent CLIs."),
      FakeModel.text(
        "skein is a runtime for hosting agent CLIs such as Claude Code as supervised actors: " +
          "it drives the stream-json bus, answers permission and hook requests, keeps transcripts " +
          "the CLI can resume, and serves every session's events. 🧶"
      )
    ),
    Duration.millis(25)
  ),
  // 2. a tool call the policy approves
  FakeModel.toolUse("Bash", { command: "echo 'hello from skein' > hello.txt && cat hello.txt", description: "Write a greeting" }),
  FakeModel.text("I wrote hello.txt; it says \"hello from skein\"."),
  // 3. one it denies
  FakeModel.toolUse("Bash", { command: "rm -rf ./important", description: "Delete a folder" }),
  FakeModel.text("Understood: the host's policy does not allow deleting files, so I left it alone."),
  // 4. a background task: a first result while it runs, a second after its notification
  FakeModel.toolUse("Bash", {
    command: "sleep 1; echo background done",
    description: "Wait, then print",
    run_in_background: true
  }),
  FakeModel.text("It runs in the background; I will report when it is done."),
  FakeModel.text("The background task finished and printed \"background done\"."),
  // 5. a long answer, interrupted mid-stream; then a short one
  FakeModel.withDelay(FakeModel.text(longAnswer), Duration.millis(30)),
  FakeModel.text("Still here, and ready for the next thing.")
]

// --- printing ----------------------------------------------------------------

/** Text and thinking deltas are written inline; everything else gets a line of its own. */
let inline = false
const writeLine = (text: string) =>
  Effect.sync(() => {
    process.stdout.write(`${inline ? "\n" : ""}${text}\n`)
    inline = false
  })
const writeInline = (text: string) =>
  Effect.sync(() => {
    // A block's end closes the line its deltas were on, if any.
    if (text === "\n" && !inline) return
    process.stdout.write(text)
    inline = !text.endsWith("\n")
  })

type Output = { readonly line: string } | { readonly inline: string } | undefined

const short = (value: unknown, max = 90): string => {
  const text = typeof value === "string" ? value : JSON.stringify(value)
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}

const blockSummary = (block: Anthropic.ContentBlock): string => {
  if (!Anthropic.isKnownBlock(block)) return block.type
  switch (block.type) {
    case "tool_use":
      return `tool_use ${block.name} ${short(block.input)}`
    case "tool_result":
      return `${block.is_error === true ? red("tool_result (error)") : "tool_result"} ${short(block.content ?? "")}`
    case "text":
      return `text "${short(block.text, 60)}"`
    default:
      return block.type
  }
}

const show = (decoded: Turn.SessionEvent): Output => {
  const line = (text: string) => ({ line: text })
  const inline = (text: string) => ({ inline: text })
  switch (decoded._tag) {
    case "Unknown":
      return line(yellow(`? line ${decoded.line}: unknown ${decoded.type ?? "(no type)"}${decoded.subtype ? `/${decoded.subtype}` : ""} (kept as data)`))
    case "Malformed":
      return line(red(`! line ${decoded.line}: malformed ${decoded.type}: ${decoded.issue}`))
    case "Unparseable":
      return line(red(`! line ${decoded.line}: not JSON: ${decoded.error}`))
    case "Oversized":
      return line(red(`! line ${decoded.line}: ${decoded.bytes} bytes, over the ${decoded.limit} limit`))
    case "Message":
      break
  }
  const m = decoded.message
  switch (m.type) {
    case "system":
      switch (m.subtype) {
        case "init":
          return line(cyan(`● init  session ${m.session_id}  model ${m.model}  ${m.tools.length} tools  CLI ${m.claude_code_version}`))
        case "session_state_changed":
          return line(cyan(`● state ${m.state}`))
        case "status":
          return line(dim(`● status ${m.status ?? "(cleared)"}`))
        case "task_started":
          return line(magenta(`● task_started ${m.task_id} (${m.task_type ?? "task"}): ${m.description}`))
        case "task_updated":
          return line(magenta(`● task_updated ${m.task_id} ${short(m.patch)}`))
        case "task_notification":
          return line(magenta(`● task_notification ${m.task_id} ${m.status}: ${short(m.summary, 60)}`))
        case "background_tasks_changed":
          return line(magenta(`● background tasks: ${m.tasks.length === 0 ? "none" : m.tasks.map((t) => t.task_id).join(", ")}`))
        case "thinking_tokens":
          return undefined
        default:
          return line(dim(`● system/${m.subtype}`))
      }
    case "stream_event": {
      const event = m.event
      if (!CliMessage.isKnownStreamEvent(event)) return line(dim(`● stream_event/${event.type} (new kind, kept)`))
      if (event.type === "content_block_start") {
        return event.content_block.type === "thinking"
          ? inline(dim("  thinking: "))
          : event.content_block.type === "text" ? inline("  ") : undefined
      }
      if (event.type === "content_block_delta") {
        const delta = event.delta
        if (!Anthropic.isKnownDelta(delta)) return undefined
        if (delta.type === "text_delta") return inline(bold(delta.text))
        if (delta.type === "thinking_delta") return inline(dim(delta.thinking))
        return undefined
      }
      if (event.type === "content_block_stop") return inline("\n")
      return undefined
    }
    case "assistant":
      return line(dim(`● assistant ${m.message.content.map(blockSummary).join(", ")}`))
    case "user": {
      const content = m.message.content
      return line(dim(`● user ${typeof content === "string" ? `"${short(content, 60)}"` : content.map(blockSummary).join(", ")}`))
    }
    case "result":
      return line(green(
        `● result ${m.subtype}  ${m.num_turns} turn(s)  ${m.usage.input_tokens} in / ${m.usage.output_tokens} out tokens  $${m.total_cost_usd.toFixed(4)}  ${m.duration_ms} ms`
      ))
    case "control_request":
      return m.request.subtype === "can_use_tool"
        ? line(yellow(`● can_use_tool ${m.request.tool_name} ${short(m.request.input)}`))
        : line(dim(`● control_request ${m.request.subtype}`))
    case "control_response":
      return line(dim(`● control_response ${m.response.subtype} to ${m.response.request_id}`))
    default:
      return line(dim(`● ${m.type}`))
  }
}

const print = (event: Turn.SessionEvent) => {
  const output = show(event)
  return output === undefined ? Effect.void : "line" in output ? writeLine(output.line) : writeInline(output.inline)
}

const heading = (n: number, title: string) => writeLine(`\n${bold(`── ${n}. ${title} `)}${dim("─".repeat(Math.max(0, 60 - title.length)))}`)

const describeSummary = (summary: Turn.TurnSummary) =>
  writeLine(
    (summary.interrupted ? yellow : green)(
      `✔ turn done: ${summary.results.length} result(s), stop ${summary.stopReason ?? "null"}, ` +
        `${summary.usage.outputTokens} out tokens, interrupted ${summary.interrupted}`
    )
  )

// --- the host's permission policy --------------------------------------------

/** Bash may run, unless it deletes; everything else is denied. */
const policy = Permissions.layer((request) =>
  Effect.gen(function*() {
    const command = typeof request.input["command"] === "string" ? request.input["command"] : ""
    const decision = request.toolName === "Bash" && !/\brm\b/.test(command)
      ? Permissions.allow()
      : Permissions.deny(`This host's policy does not allow deleting files (${short(command, 40)})`)
    yield* writeLine(
      decision.behavior === "allow"
        ? green(`  policy: allow ${request.toolName}`)
        : red(`  policy: deny ${request.toolName}: ${decision.message}`)
    )
    return decision
  })
)

// --- the tour ------------------------------------------------------------------

const tempDirs = ClaudeCli.offlineDirs("skein-demo-")

/** Sends `content`, prints the turn's events as they come, then its summary. */
const runTurn = (session: Session.Session, content: string, onEvent?: (event: Turn.SessionEvent) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    yield* writeLine(`${bold("> ")}${content}`)
    const turn = yield* session.send(content)
    yield* turn.events.pipe(Stream.runForEach((event) => Effect.zipRight(print(event), onEvent?.(event) ?? Effect.void)))
    const summary = yield* turn.result
    yield* describeSummary(summary)
    return summary
  })

const main = Effect.gen(function*() {
  const model = yield* FakeModel.make({ replies: script })
  const d = yield* tempDirs
  yield* Console.log(dim(`FakeModel listening on ${model.url}; scratch directory ${d.root}`))
  const session = yield* Session.start({
    cwd: d.cwd,
    configDir: d.configDir,
    env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: d.configDir, tmpDir: d.tmpDir }),
    // The full tool set: `--bare` drops Bash's `run_in_background`.
    bare: false,
    includePartialMessages: true,
    stopTimeouts: { stdinGrace: "1 second", termGrace: "1 second" }
  }).pipe(Effect.provide(policy))
  yield* Console.log(dim(`claude running as pid ${session.pid} in ${d.cwd}`))

  yield* heading(1, "a text turn, streamed")
  yield* runTurn(session, "What is skein, in one paragraph?")

  yield* heading(2, "a tool call the policy approves")
  yield* runTurn(session, "Write a greeting to hello.txt")
  yield* writeLine(dim(`  on disk: hello.txt = ${JSON.stringify(Fs.readFileSync(Path.join(d.cwd, "hello.txt"), "utf8"))}`))

  yield* heading(3, "a tool call the policy denies")
  yield* runTurn(session, "Delete the important folder")

  yield* heading(4, "a background task: the late result stays in its turn")
  let results = 0
  let live = 0
  const summary = yield* runTurn(session, "Run a slow job in the background", (event) => {
    if (event._tag !== "Message") return Effect.void
    const m = event.message
    if (m.type === "system" && m.subtype === "background_tasks_changed") live = m.tasks.length
    if (m.type === "result") results++
    if (m.type === "result" && results === 1 && live > 0) {
      return writeLine(yellow(`  ↳ a result, but ${live} background task(s) still run: the turn is not over`))
    }
    if (m.type === "result" && results > 1) return writeLine(yellow(`  ↳ result #${results}: the task's follow-up, in the same turn`))
    if (m.type === "system" && m.subtype === "session_state_changed" && m.state === "idle" && live > 0) {
      return writeLine(yellow("  ↳ idle with a live task: still waiting"))
    }
    return Effect.void
  })
  yield* writeLine(dim(`  the turn saw ${summary.results.length} results; background tasks now: ${(yield* session.state.get).backgroundTasks.length}`))

  yield* heading(5, "an interrupt mid-stream")
  let deltas = 0
  let interrupter: Fiber.RuntimeFiber<void> | undefined
  yield* runTurn(session, "Tell me everything about skein", (event) => {
    if (event._tag !== "Message" || event.message.type !== "stream_event") return Effect.void
    if (event.message.event.type !== "content_block_delta" || ++deltas !== 8) return Effect.void
    return Effect.gen(function*() {
      yield* writeLine(yellow("  ⏹ session.interrupt"))
      interrupter = yield* Effect.fork(Effect.orDie(session.interrupt))
    })
  })
  if (interrupter !== undefined) yield* Fiber.join(interrupter)
  yield* runTurn(session, "Are you still there?")

  // Close stdin: the CLI finishes and exits; the scope then removes everything.
  yield* session.end
  const exit = yield* session.exit
  const state = yield* session.state.get
  const requests = yield* model.requests
  yield* Console.log(
    dim(
      `\nCLI exited with code ${exit.code}${exit.signal === null ? "" : ` (${exit.signal})`}; ` +
        `${state.counters.results} results, $${state.counters.costUsd.toFixed(4)} in all; ` +
        `FakeModel got ${requests.filter(FakeModel.isConversation).length} conversation request(s)`
    )
  )
})

main.pipe(
  Effect.scoped,
  Effect.provide(Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer)),
  NodeRuntime.runMain
)
