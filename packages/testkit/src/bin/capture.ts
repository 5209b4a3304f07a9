/**
 * Records the real CLI's raw stdout for protocol fixtures:
 *
 *   npx tsx packages/testkit/src/bin/capture.ts [--cli <version>] [name ...]
 *
 * With no name it records every scenario. Each run talks to a FakeModel and
 * writes `packages/protocol/test/fixtures/<name>.ndjson` byte for byte. With
 * `--cli <version>` it runs that release instead of the pinned one
 * (installed on demand by `CliRelease.install`) and writes to
 * `fixtures/cli-<version>/`. Releases that print no `session_state_changed`
 * (the 2.0 line) are detected from the stream: a capture then ends a turn at
 * its `result`.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import type { Scope } from "effect"
import { Chunk, Console, Effect, Fiber, Option, Queue, Ref, Stream } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as ClaudeCli from "../ClaudeCli.js"
import * as CliRelease from "../CliRelease.js"
import * as FakeModel from "../FakeModel.js"

const fixtures = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../../protocol/test/fixtures")

const argv = process.argv.slice(2)
const cliFlag = argv.indexOf("--cli")
/** `--cli <version>`: the release to capture, instead of the pinned one. */
const releaseVersion = cliFlag === -1 ? undefined : argv[cliFlag + 1]
const names = cliFlag === -1 ? argv : argv.filter((_, i) => i !== cliFlag && i !== cliFlag + 1)
const release = releaseVersion === undefined ? undefined : await Effect.runPromise(CliRelease.install(releaseVersion))
const outDir = release === undefined ? fixtures : Path.join(fixtures, `cli-${release.version}`)

type Json = Record<string, unknown>

/** CAPTURE_TRACE=1 echoes every stdout line (shortened) to stderr. */
const trace = process.env.CAPTURE_TRACE === "1"
/** CAPTURE_REQUESTS=<dir> saves FakeModel's request log there, as JSON. */
const requestsDir = process.env.CAPTURE_REQUESTS

const asObject = (line: string): Json => {
  try {
    const value: unknown = JSON.parse(line)
    return typeof value === "object" && value !== null && !Array.isArray(value) ? { ...value } : {}
  } catch {
    return {}
  }
}

const field = (value: unknown, key: string): unknown =>
  typeof value === "object" && value !== null && key in value ? Object.getOwnPropertyDescriptor(value, key)?.value : undefined

/** A running capture: the CLI, its FakeModel, and a queue of parsed stdout lines. */
const session = Effect.fn("capture.session")(function*(options: {
  readonly replies: ReadonlyArray<FakeModel.Reply>
  readonly fallback?: FakeModel.Reply
  readonly args: ReadonlyArray<string>
  readonly env?: Record<string, string>
}) {
  const model = yield* FakeModel.make({ replies: options.replies, fallback: options.fallback })
  const run = yield* ClaudeCli.spawn({
    baseUrl: model.url,
    args: [...ClaudeCli.streamJsonArgs, ...options.args],
    release,
    env: { CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS: "1", ...options.env }
  })
  if (release !== undefined) {
    // The 2.0 line keeps background-task output under /tmp/claude/<cwd slug>/, whatever TMPDIR says.
    const legacyTasks = Path.join("/tmp/claude", run.cwd.replace(/[^a-zA-Z0-9]/g, "-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(legacyTasks, { recursive: true, force: true })))
  }
  const bytes = yield* Ref.make(Chunk.empty<Uint8Array>())
  const inbox = yield* Queue.unbounded<Json>()
  /** Whether this release prints `session_state_changed` at all (the 2.0 line does not). */
  const stateEvents = yield* Ref.make(false)
  const reader = yield* run.stdout.pipe(
    Stream.tap((chunk) => Ref.update(bytes, Chunk.append(chunk))),
    ClaudeCli.lines,
    Stream.tap((line) => trace ? Console.error(`  < ${line.slice(0, 300)}`) : Effect.void),
    Stream.map(asObject),
    Stream.tap((message) => isType("system", "session_state_changed")(message) ? Ref.set(stateEvents, true) : Effect.void),
    Stream.runForEach((message) => Queue.offer(inbox, message)),
    Effect.ensuring(Queue.offer(inbox, { type: "__eof__" })),
    Effect.fork
  )
  /** Takes stdout messages until one satisfies `predicate`. */
  const waitFor = (label: string, predicate: (message: Json) => boolean) =>
    Effect.gen(function*() {
      for (;;) {
        const message = yield* Queue.take(inbox)
        if (message.type === "__eof__") {
          return yield* Effect.dieMessage(`stdout ended while waiting for ${label}\n${yield* run.stderr}`)
        }
        if (predicate(message)) return message
      }
    }).pipe(Effect.timeoutFail({ duration: "60 seconds", onTimeout: () => new Error(`timed out waiting for ${label}`) }), Effect.orDie)
  /** The end of the work after a `result`: `idle` if this release prints state events, else nothing more. */
  const settle = Effect.gen(function*() {
    if (yield* Ref.get(stateEvents)) yield* waitFor("idle", isIdle)
  })
  /** Like `waitFor`, but gives up quietly after `seconds`: for what an older release may never print. */
  const maybe = (label: string, predicate: (message: Json) => boolean, seconds: number) =>
    waitFor(label, predicate).pipe(
      Effect.timeout(`${seconds} seconds`),
      Effect.option,
      Effect.tap((found) => Option.isNone(found) ? Console.error(`  (no ${label} within ${seconds} s)`) : Effect.void)
    )
  const finish = (name: string, options?: { readonly transcript?: boolean }) => Effect.gen(function*() {
    yield* run.closeStdin
    yield* Fiber.join(reader)
    yield* run.exitCode
    // What the CLI asked the model, for whoever reads the capture log.
    for (const request of yield* model.requests) {
      const body = Option.getOrUndefined(request.messagesRequest)
      yield* Console.error(
        `  ${request.method} ${request.url} model=${body?.model ?? "-"} stream=${body?.stream ?? "-"} messages=${
          body?.messages.length ?? "-"
        } tools=${body?.tools?.length ?? 0} max_tokens=${body?.max_tokens ?? "-"}`
      )
    }
    if (requestsDir !== undefined) {
      Fs.writeFileSync(Path.join(requestsDir, `${name}.requests.json`), JSON.stringify(yield* model.requests, null, 2))
    }
    if (options?.transcript === true) saveTranscript(run.configDir, name)
    return Buffer.concat(Chunk.toReadonlyArray(yield* Ref.get(bytes)))
  })
  return { model, run, waitFor, settle, maybe, finish }
})

/** Copies the session's transcript beside the capture, as `<name>.transcript.jsonl`. */
const saveTranscript = (configDir: string, name: string) => {
  const projects = Path.join(configDir, "projects")
  const files = Fs.readdirSync(projects, { recursive: true, encoding: "utf8" })
    // The 2.0 line also keeps agent warm-up sidechains (`agent-<id>.jsonl`) beside the main one.
    .filter((file) => file.endsWith(".jsonl") && !file.includes("subagents") && !Path.basename(file).startsWith("agent-"))
  if (files.length !== 1) {
    throw new Error(`expected one transcript under ${projects}, found ${files.length}: ${files.join(", ")}`)
  }
  Fs.mkdirSync(outDir, { recursive: true })
  Fs.copyFileSync(Path.join(projects, files[0]!), Path.join(outDir, `${name}.transcript.jsonl`))
}

const isType = (type: string, subtype?: string) => (message: Json) =>
  message.type === type && (subtype === undefined || message.subtype === subtype)

const isControlResponse = (requestId: string) => (message: Json) =>
  message.type === "control_response" && field(message.response, "request_id") === requestId

/** The main conversation's request, streaming or not. */
const isRetry: FakeModel.RequestMatch = (request) =>
  Option.match(request.messagesRequest, {
    onNone: () => false,
    onSome: (body) => (body.tools?.length ?? 0) > 0 && !FakeModel.isCompaction(request)
  })

const isIdle = (message: Json) =>
  message.type === "system" && message.subtype === "session_state_changed" && message.state === "idle"

const initialize = { type: "control_request", request_id: "req_init_1", request: { subtype: "initialize" } }

/** Two turns, then /compact; FakeModel answers the summarization request. */
const compactScenario = (name: string, transcript: boolean) =>
  Effect.gen(function*() {
    const summary = FakeModel.compactSummary(
      "1. Primary Request and Intent: the user greeted twice and asked for nothing else.\n2. Pending Tasks: none."
    )
    const s = yield* session({
      replies: [FakeModel.text("Hi there! First reply."), FakeModel.text("Hello again! Second reply."), summary],
      args: []
    })
    yield* s.run.send(initialize)
    yield* s.waitFor("initialize response", isControlResponse("req_init_1"))
    yield* s.run.send(ClaudeCli.userMessage("Hi, this is the first turn."))
    yield* s.waitFor("first result", isType("result"))
    yield* s.run.send(ClaudeCli.userMessage("And this is the second turn."))
    yield* s.waitFor("second result", isType("result"))
    yield* s.run.send(ClaudeCli.userMessage("/compact"))
    yield* s.waitFor("compact result", isType("result"))
    yield* s.settle
    const requests = yield* s.model.requests
    yield* Console.error(`compact: ${requests.length} requests, summary used: ${
      (yield* s.model.remaining).every((reply) => reply !== summary)
    }`)
    return yield* s.finish(name, { transcript })
  }).pipe(Effect.orDie)


const scenarios: Record<string, Effect.Effect<Buffer, never, Scope.Scope>> = {
  // (a) thinking + text, with partial messages; starts with an initialize request.
  "text-thinking": Effect.gen(function*() {
    const s = yield* session({
      replies: [
        FakeModel.combine(
          FakeModel.thinking("The user wants a greeting. A short friendly reply will do.", "sig-capture-1"),
          FakeModel.text("Hello! I'm happy to help. What would you like to work on today?")
        )
      ],
      args: ["--include-partial-messages"]
    })
    yield* s.run.send(initialize)
    yield* s.waitFor("initialize response", isControlResponse("req_init_1"))
    yield* s.run.send(ClaudeCli.userMessage("Say hello, please."))
    yield* s.waitFor("result", isType("result"))
    yield* s.settle
    return yield* s.finish("text-thinking")
  }).pipe(Effect.orDie),

  // (b) a tool call that needs permission, allowed through the stdio permission tool.
  "permission": Effect.gen(function*() {
    const s = yield* session({
      replies: [
        FakeModel.combine(
          FakeModel.text("I'll run a command."),
          FakeModel.toolUse("Bash", { command: "touch skein.txt && echo created", description: "Create a file" })
        ),
        FakeModel.text("Created skein.txt.")
      ],
      args: ["--permission-prompt-tool", "stdio"]
    })
    yield* s.run.send(initialize)
    yield* s.waitFor("initialize response", isControlResponse("req_init_1"))
    yield* s.run.send(ClaudeCli.userMessage("Create skein.txt with touch."))
    const request = yield* s.waitFor(
      "can_use_tool",
      (message) => message.type === "control_request" && field(message.request, "subtype") === "can_use_tool"
    )
    yield* s.run.send({
      type: "control_response",
      response: {
        subtype: "success",
        request_id: request.request_id,
        response: { behavior: "allow", updatedInput: field(request.request, "input") }
      }
    })
    yield* s.waitFor("result", isType("result"))
    yield* s.settle
    return yield* s.finish("permission")
  }).pipe(Effect.orDie),

  // (c) an interrupt while the model is still streaming.
  "interrupt": Effect.gen(function*() {
    const words = Array.from({ length: 60 }, (_, i) => `word${i}`).join(" ")
    const s = yield* session({
      replies: [FakeModel.withDelay(FakeModel.text(`A long answer follows: ${words}.`), "150 millis")],
      args: ["--include-partial-messages"]
    })
    yield* s.run.send(ClaudeCli.userMessage("Tell me something long."))
    yield* s.waitFor(
      "a text delta",
      (message) => message.type === "stream_event" && field(field(message.event, "delta"), "type") === "text_delta"
    )
    yield* s.run.send({ type: "control_request", request_id: "req_interrupt_1", request: { subtype: "interrupt" } })
    yield* s.waitFor("interrupt response", isControlResponse("req_interrupt_1"))
    yield* s.waitFor("result", isType("result"))
    yield* s.settle
    return yield* s.finish("interrupt")
  }).pipe(Effect.orDie),

  // (d) a background Bash task; the capture runs until the session is idle.
  "background-task": Effect.gen(function*() {
    const s = yield* session({
      replies: [
        FakeModel.toolUse("Bash", {
          command: "sleep 1; echo background done",
          description: "Wait, then print",
          run_in_background: true
        }),
        FakeModel.text("The command is running in the background."),
        FakeModel.text("The background command finished and printed: background done.")
      ],
      args: ["--allowedTools", "Bash"]
    })
    yield* s.run.send(ClaudeCli.userMessage("Run a slow command in the background."))
    yield* s.waitFor("first result", isType("result"))
    // The first idle comes while the task still runs; its notification then starts a second turn.
    // An older release may print neither: wait a while for whatever it does print.
    yield* s.maybe("task notification", isType("system", "task_notification"), 15)
    yield* s.maybe("second result", isType("result"), 15)
    yield* s.settle
    return yield* s.finish("background-task")
  }).pipe(Effect.orDie),

  // (d') a background Bash task the host stops (`stop_task`) before it ends.
  "background-task-killed": Effect.gen(function*() {
    const s = yield* session({
      replies: [
        FakeModel.toolUse("Bash", { command: "sleep 60; echo never printed", description: "Wait a minute", run_in_background: true }),
        FakeModel.text("The command is running in the background.")
      ],
      fallback: FakeModel.text("The background command was stopped."),
      args: ["--allowedTools", "Bash"]
    })
    yield* s.run.send(ClaudeCli.userMessage("Run a very slow command in the background."))
    const started = yield* s.waitFor("task_started", isType("system", "task_started"))
    yield* s.waitFor("first result", isType("result"))
    yield* s.settle
    yield* s.run.send({ type: "control_request", request_id: "req_stop_1", request: { subtype: "stop_task", task_id: started.task_id } })
    yield* s.waitFor("stop_task response", isControlResponse("req_stop_1"))
    yield* s.maybe("task_updated", isType("system", "task_updated"), 15)
    yield* s.maybe("task notification", isType("system", "task_notification"), 10)
    yield* s.maybe("a follow-up result", isType("result"), 10)
    yield* s.maybe("idle", isIdle, 10)
    return yield* s.finish("background-task-killed")
  }).pipe(Effect.orDie),

  // (e) two turns, then /compact; FakeModel answers the summarization request.
  "compact": compactScenario("compact", false),

  // (e') the same, keeping the transcript.
  "compact-history": compactScenario("compact-history", true),

  // (f) one 529 overloaded answer, retried by the CLI; with partial messages; keeps the transcript.
  "retry": Effect.gen(function*() {
    const s = yield* session({
      replies: [
        FakeModel.withRetryAfter(FakeModel.overloaded, 50),
        // The 2.0 line retries a failed stream without streaming.
        FakeModel.matching(FakeModel.text("Answered after one retry."), isRetry)
      ],
      args: ["--include-partial-messages"]
    })
    yield* s.run.send(ClaudeCli.userMessage("Say something, even if the API is busy."))
    yield* s.waitFor("result", isType("result"))
    yield* s.settle
    return yield* s.finish("retry", { transcript: true })
  }).pipe(Effect.orDie),

  // (g) two tool calls in one message (both allowed), then text; with partial messages; keeps the transcript.
  "two-tools": Effect.gen(function*() {
    const s = yield* session({
      replies: [
        FakeModel.combine(
          FakeModel.text("Two commands."),
          FakeModel.toolUse("Bash", { command: "echo one", description: "Print one" }),
          FakeModel.toolUse("Bash", { command: "exit 3", description: "Fail" })
        ),
        FakeModel.text("One printed, the other failed.")
      ],
      args: ["--include-partial-messages", "--allowedTools", "Bash"]
    })
    yield* s.run.send(ClaudeCli.userMessage("Run two commands."))
    yield* s.waitFor("result", isType("result"))
    yield* s.settle
    return yield* s.finish("two-tools", { transcript: true })
  }).pipe(Effect.orDie)
}

const capture = (name: string) =>
  Option.match(Option.fromNullable(scenarios[name]), {
    onNone: () => Effect.dieMessage(`unknown capture ${name}; known: ${Object.keys(scenarios).join(", ")}`),
    onSome: (scenario) =>
      Effect.gen(function*() {
        const bytes = yield* Effect.scoped(scenario)
        Fs.mkdirSync(outDir, { recursive: true })
        const file = Path.join(outDir, `${name}.ndjson`)
        Fs.writeFileSync(file, bytes)
        yield* Console.log(`${file}: ${bytes.length} bytes`)
      })
  })

NodeRuntime.runMain(Effect.forEach(names.length > 0 ? names : Object.keys(scenarios), capture, { discard: true }))
