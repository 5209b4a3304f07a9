/**
 * End-to-end: the real Claude Code CLI against FakeModel, driven through
 * `Session.start`. Every case is checked against what the CLI actually did:
 * the requests FakeModel received, and files on disk.
 */
import { describe, expect, it } from "@effect/vitest"
import { TaskManager } from "@skein/kernel"
import { FakeModel } from "@skein/testkit"
import { Chunk, Effect, Fiber, Option, Stream } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Hooks from "../src/Hooks.js"
import * as Permissions from "../src/Permissions.js"
import * as Session from "../src/Session.js"
import type { SessionEvent } from "../src/Turn.js"
import * as Live from "./live.js"

type Block = { readonly [key: string]: unknown }

const body = (request: FakeModel.RecordedRequest) => Option.getOrThrow(request.messagesRequest)

/** A request's messages with string contents as text blocks and cache markers dropped, for prefix comparison. */
const normalized = (request: FakeModel.RecordedRequest): ReadonlyArray<{ readonly role: string; readonly content: ReadonlyArray<Block> }> =>
  body(request).messages.map((message) => ({
    role: message.role,
    content: typeof message.content === "string"
      ? [{ type: "text", text: message.content }]
      : message.content.map((block): Block => {
        const { cache_control: _, ...rest }: Block = block
        return rest
      })
  }))

const lastUserText = (request: FakeModel.RecordedRequest): string => {
  const last = normalized(request).at(-1)
  return last === undefined ? "" : last.content.flatMap((b) => typeof b["text"] === "string" ? [b["text"]] : []).join("\n")
}

const collect = <A, E>(stream: Stream.Stream<A, E>) => Effect.map(Stream.runCollect(stream), Chunk.toReadonlyArray)

const isTextDelta = (event: SessionEvent): boolean =>
  event._tag === "Message" && event.message.type === "stream_event" && event.message.event.type === "content_block_delta"

describe("Session e2e with the real CLI", () => {
  it.scopedLive("denies a permission request whose handler never answers, once its timeout passes", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.toolUse("Bash", { command: "touch never.txt" }), FakeModel.text("Fine, no file.")]
      })
      const d = yield* Live.dirs
      const asked: Array<string> = []
      const session = yield* Session.start(Live.liveOptions(model, d)).pipe(
        Effect.provide(Permissions.layer((request) => {
          asked.push(request.toolUseId)
          return Effect.never
        }, { timeout: "300 millis" }))
      )
      const summary = yield* Effect.flatMap(session.send("Make the file"), (t) => t.result)
      expect(summary.text).toBe("Fine, no file.")
      expect(asked).toEqual(["toolu_fake_0001_0"])
      expect(Fs.existsSync(Path.join(d.cwd, "never.txt"))).toBe(false)
      const followUp = yield* model.awaitRequest(1, FakeModel.isConversation)
      expect(JSON.stringify(followUp.body)).toContain("The permission request for Bash timed out after")
      expect((yield* session.state.get).pendingPermissions).toEqual([])
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("failure 11: with no Permissions service, a tool that needs approval is denied with a message naming the missing handler", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.toolUse("Bash", { command: "touch unasked.txt" }), FakeModel.text("Denied, then.")]
      })
      const d = yield* Live.dirs
      const session = yield* Session.start(Live.liveOptions(model, d))
      const turn = yield* session.send("Make the file")
      const events = yield* Effect.fork(collect(turn.events))
      const summary = yield* turn.result
      expect(summary.text).toBe("Denied, then.")
      expect(Fs.existsSync(Path.join(d.cwd, "unasked.txt"))).toBe(false)
      // The CLI asked the host over the bus (it does so only with --permission-prompt-tool stdio)…
      const asks = (yield* Fiber.join(events)).filter((e) =>
        e._tag === "Message" && e.message.type === "control_request" && e.message.request.subtype === "can_use_tool"
      )
      expect(asks).toHaveLength(1)
      // …and the model was told why, in words that name the fix.
      const followUp = yield* model.awaitRequest(1, FakeModel.isConversation)
      expect(JSON.stringify(followUp.body)).toContain("no permission handler")
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("interrupts a turn mid-stream: it resolves as interrupted, and the next turn works", () =>
    Effect.gen(function*() {
      const long = Array.from({ length: 60 }, (_, i) => `word${i}`).join(" ")
      const model = yield* FakeModel.make({
        replies: [FakeModel.withDelay(FakeModel.text(long), "100 millis"), FakeModel.text("Back again.")]
      })
      const d = yield* Live.dirs
      const session = yield* Session.start(Live.liveOptions(model, d, { includePartialMessages: true }))
      const turn = yield* session.send("Talk for a while")
      const interruptOnce = yield* Effect.once(session.interrupt)
      const events = yield* turn.events.pipe(
        Stream.tap((event) => isTextDelta(event) ? interruptOnce : Effect.void),
        collect,
        Effect.fork
      )
      const summary = yield* turn.result
      expect(summary.interrupted).toBe(true)
      expect(summary.results).toHaveLength(1)
      const seen = yield* Fiber.join(events)
      // The stream was cut: FakeModel sent 60 deltas, far fewer arrived before the interrupt took.
      expect(seen.filter(isTextDelta).length).toBeLessThan(60)
      expect(seen.some((e) =>
        e._tag === "Message" && e.message.type === "user" && JSON.stringify(e.message).includes("[Request interrupted by user]")
      )).toBe(true)

      const next = yield* Effect.flatMap(session.send("Are you there?"), (t) => t.result)
      expect(next.text).toBe("Back again.")
      expect(next.interrupted).toBe(false)
      const request = yield* model.awaitRequest(1, FakeModel.isConversation)
      expect(FakeModel.messagesText(request)).toContain("Are you there?")
      expect((yield* session.state.get).status).toBe("idle")
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("ends a background-task turn at idle with no live task, after the follow-up result, mirrored into TaskManager", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.toolUse("Bash", {
            command: "sleep 2; echo background done > bg.txt",
            description: "Wait, then write",
            run_in_background: true
          }),
          FakeModel.text("Started it in the background."),
          FakeModel.text("The background task finished.")
        ]
      })
      const d = yield* Live.dirs
      const tasks = yield* TaskManager.make({ root: Path.join(d.root, "tasks") })
      const session = yield* Session.start(Live.liveOptions(model, d, { bare: false, allowedTools: ["Bash"] })).pipe(
        Effect.provideService(TaskManager.TaskManager, tasks)
      )
      const turn = yield* session.send("Run it in the background")
      const events = yield* Effect.fork(collect(turn.events))
      const summary = yield* turn.result
      const seen = yield* Fiber.join(events)

      // Two results: the first came while the task still ran, the second after its notification.
      expect(summary.results).toHaveLength(2)
      expect(summary.text).toBe("The background task finished.")
      const systems = seen.flatMap((e) => e._tag === "Message" && e.message.type === "system" ? [e.message] : [])
      const notification = systems.find((m) => m.subtype === "task_notification")
      expect(notification).toBeDefined()
      const kinds = seen.flatMap((e) =>
        e._tag !== "Message" ? [] : e.message.type === "result" ? ["result"] : e.message.type === "system" ? [e.message.subtype] : []
      )
      expect(kinds.indexOf("result")).toBeLessThan(kinds.indexOf("task_notification"))
      expect(kinds.lastIndexOf("result")).toBeGreaterThan(kinds.indexOf("task_notification"))
      expect(kinds.at(-1)).toBe("session_state_changed")
      expect(Fs.readFileSync(Path.join(d.cwd, "bg.txt"), "utf8")).toBe("background done\n")

      const state = yield* session.state.get
      expect(state.backgroundTasks).toEqual([])
      expect(state.status).toBe("idle")
      const started = systems.find((m) => m.subtype === "task_started")
      expect(started?.subtype === "task_started" ? started.task_type : undefined).toBe("local_bash")
      const taskId = started?.subtype === "task_started" ? started.task_id : ""
      const record = yield* tasks.get(taskId)
      expect(record.type).toBe("local_bash")
      expect(record.status).toBe("completed")

      // FakeModel's last conversation request carried the task's notification.
      const followUp = yield* model.awaitRequest(2, FakeModel.isConversation)
      expect(FakeModel.messagesText(followUp)).toContain(taskId)
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("setModel takes effect: FakeModel's next conversation request names the new model", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make()
      const d = yield* Live.dirs
      const session = yield* Session.start(Live.liveOptions(model, d))
      yield* Effect.flatMap(session.send("one"), (t) => t.result)
      const before = yield* model.awaitRequest(0, FakeModel.isConversation)
      expect(body(before).model).not.toBe("claude-sonnet-4-5")

      yield* session.setModel("claude-sonnet-4-5")
      expect((yield* session.state.get).model).toBe("claude-sonnet-4-5")
      yield* Effect.flatMap(session.send("two"), (t) => t.result)
      const after = yield* model.awaitRequest(1, FakeModel.isConversation)
      expect(body(after).model).toBe("claude-sonnet-4-5")
      expect(FakeModel.messagesText(after)).toContain("two")

      // A retired name the CLI maps to another: the state shows the model the CLI chose instead, as the next request does.
      yield* session.setModel("claude-opus-4-1")
      const chosen = (yield* session.state.get).model
      expect(chosen).not.toBe("claude-opus-4-1")
      yield* Effect.flatMap(session.send("three"), (t) => t.result)
      const third = yield* model.awaitRequest(2, FakeModel.isConversation)
      expect(body(third).model).toBe(chosen)
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("setPermissionMode takes effect: in plan mode FakeModel's next request carries the plan-mode instructions", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make()
      const d = yield* Live.dirs
      // `--bare` leaves the plan-mode instructions out, so this runs the full CLI.
      const session = yield* Session.start(Live.liveOptions(model, d, { bare: false }))
      yield* Effect.flatMap(session.send("one"), (t) => t.result)
      const before = yield* model.awaitRequest(0, FakeModel.isConversation)
      expect(FakeModel.messagesText(before)).not.toContain("Plan mode is active")
      expect((yield* session.state.get).permissionMode).toBe("default")

      yield* session.setPermissionMode("plan")
      expect((yield* session.state.get).permissionMode).toBe("plan")
      yield* Effect.flatMap(session.send("two"), (t) => t.result)
      const after = yield* model.awaitRequest(1, FakeModel.isConversation)
      expect(lastUserText(after)).toContain("Plan mode is active")
      expect(lastUserText(after)).toContain("two")
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("resume and fork: the new process's first request carries the parent's history as its prefix", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.text("Noted: kumquat."),
          FakeModel.text("It was kumquat."),
          FakeModel.text("Still kumquat."),
          FakeModel.text("Forked: kumquat.")
        ]
      })
      const d = yield* Live.dirs
      const parentId = yield* Effect.scoped(Effect.gen(function*() {
        const parent = yield* Session.start(Live.liveOptions(model, d))
        yield* Effect.flatMap(parent.send("Remember the word kumquat"), (t) => t.result)
        return yield* parent.sessionId
      }))
      const parentRequest = yield* model.awaitRequest(0, FakeModel.isConversation)
      const history = [
        ...normalized(parentRequest),
        { role: "assistant", content: [{ type: "text", text: "Noted: kumquat." }] }
      ]
      const parentTranscript = Session.transcriptPath(d.configDir, d.cwd, parentId)

      // Resume: same id, and the parent's history first.
      yield* Effect.scoped(Effect.gen(function*() {
        const resumed = yield* Session.start(Live.liveOptions(model, d, { resume: parentId }))
        // Known before any turn: the resumed CLI prints `init` only once it has a user message.
        expect(yield* resumed.sessionId).toBe(parentId)
        const summary = yield* Effect.flatMap(resumed.send("What was the word?"), (t) => t.result)
        expect(summary.text).toBe("It was kumquat.")
        expect(yield* resumed.sessionId).toBe(parentId)
        // A plain resume continues the session: it has no parent.
        expect((yield* resumed.state.get).parentSessionId).toBeUndefined()
        const first = yield* model.awaitRequest(1, FakeModel.isConversation)
        expect(normalized(first).slice(0, history.length)).toEqual(history)
        expect(lastUserText(first)).toContain("What was the word?")
      }))
      // The CLI finds a session from any cwd under the same config root, and so does the check before spawning.
      const elsewhere = Path.join(d.root, "elsewhere")
      Fs.mkdirSync(elsewhere)
      yield* Effect.scoped(Effect.gen(function*() {
        const resumed = yield* Session.start({ ...Live.liveOptions(model, d, { resume: parentId }), cwd: elsewhere })
        const summary = yield* Effect.flatMap(resumed.send("And from elsewhere?"), (t) => t.result)
        expect(summary.text).toBe("Still kumquat.")
        expect(yield* resumed.sessionId).toBe(parentId)
        const first = yield* model.awaitRequest(2, FakeModel.isConversation)
        expect(normalized(first).slice(0, history.length)).toEqual(history)
      }))
      const afterResume = Fs.readFileSync(parentTranscript, "utf8")
      expect(afterResume).toContain("What was the word?")

      // Fork: a new id over the parent's history; the parent's transcript is left alone.
      // A fork learns its own id from `init`.
      expect(Session.knownSessionId({ resume: parentId, forkSession: true })).toEqual(Option.none())
      expect(Session.knownSessionId({ resume: parentTranscript })).toEqual(Option.none())
      const forked = yield* Session.start(Live.liveOptions(model, d, { resume: parentId, forkSession: true }))
      yield* Effect.flatMap(forked.send("And in the fork?"), (t) => t.result)
      const forkId = yield* forked.sessionId
      expect(forkId).not.toBe(parentId)
      const state = yield* forked.state.get
      expect(state.sessionId).toBe(forkId)
      expect(state.parentSessionId).toBe(parentId)
      const first = yield* model.awaitRequest(3, FakeModel.isConversation)
      expect(normalized(first).slice(0, history.length)).toEqual(history)
      expect(lastUserText(first)).toContain("And in the fork?")
      expect(Fs.readFileSync(parentTranscript, "utf8")).toBe(afterResume)
      expect(state.transcriptPath).toBe(Session.transcriptPath(d.configDir, d.cwd, forkId))
      const forkTranscript = Fs.readFileSync(Session.transcriptPath(d.configDir, d.cwd, forkId), "utf8")
      expect(forkTranscript).toContain("Remember the word kumquat")
      expect(forkTranscript).toContain("And in the fork?")
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("a new session's id is known before its first send, and it is the id init reports and the transcript's name", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.text("Hi."), FakeModel.text("Chosen.")] })
      const d = yield* Live.dirs
      const session = yield* Session.start(Live.liveOptions(model, d))
      // Before any turn: no wait for `init`, which the CLI prints only with the first user message.
      const before = yield* session.sessionId
      // The state holds the id the CLI reported: none before its first turn.
      expect((yield* session.state.get).sessionId).toBeUndefined()
      yield* Effect.flatMap(session.send("Hello"), (t) => t.result)
      const state = yield* session.state.get
      expect(state.sessionId).toBe(before)
      expect(yield* session.sessionId).toBe(before)
      expect(state.transcriptPath).toBe(Session.transcriptPath(d.configDir, d.cwd, before))
      expect(Fs.existsSync(Session.transcriptPath(d.configDir, d.cwd, before))).toBe(true)

      // A host may choose the id itself.
      const chosen = "6f1d3c52-8a0e-4b7e-9c1a-2d4e5f607182"
      const named = yield* Session.start(Live.liveOptions(model, d, { sessionId: chosen }))
      expect(yield* named.sessionId).toBe(chosen)
      yield* Effect.flatMap(named.send("Again"), (t) => t.result)
      expect((yield* named.state.get).sessionId).toBe(chosen)
      expect(Fs.existsSync(Session.transcriptPath(d.configDir, d.cwd, chosen))).toBe(true)
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("a resume of a missing session fails with ResumeMismatch before anything is spawned", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make()
      const d = yield* Live.dirs
      const missing = "00000000-0000-4000-8000-000000000000"
      // An executable that cannot start: reaching the spawn would fail with SpawnFailed instead.
      const error = yield* Session.start(
        Live.liveOptions(model, d, { resume: missing, executable: Path.join(d.root, "no-such-claude") })
      ).pipe(Effect.flip)
      expect(error._tag).toBe("ResumeMismatch")
      expect(error._tag === "ResumeMismatch" ? error.expected : undefined).toBe(missing)
      expect(yield* model.requests).toEqual([])
    }).pipe(Effect.provide(Live.layer)))

  it.scopedLive("a PreToolUse hook registered through Hooks is called, and its deny blocks the tool", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [FakeModel.toolUse("Bash", { command: "touch hooked.txt" }), FakeModel.text("Blocked, then.")]
      })
      const d = yield* Live.dirs
      const calls: Array<{ readonly input: { readonly [key: string]: unknown }; readonly toolUseId: string | undefined }> = []
      // Bash is allowed outright: only the hook stands in its way. `--bare` skips hooks, so this runs the full CLI.
      const session = yield* Session.start(Live.liveOptions(model, d, { bare: false, allowedTools: ["Bash"] })).pipe(
        Effect.provide(Hooks.layer([{
          event: "PreToolUse",
          matcher: "Bash",
          handle: (input, context) => {
            calls.push({ input, toolUseId: context.toolUseId })
            return Effect.succeed({
              hookSpecificOutput: {
                hookEventName: "PreToolUse",
                permissionDecision: "deny",
                permissionDecisionReason: "blocked by the skein hook"
              }
            })
          }
        }]))
      )
      const summary = yield* Effect.flatMap(session.send("Make the file"), (t) => t.result)
      expect(summary.text).toBe("Blocked, then.")
      expect(calls).toHaveLength(1)
      expect(calls[0]?.toolUseId).toBe("toolu_fake_0001_0")
      expect(calls[0]?.input["hook_event_name"]).toBe("PreToolUse")
      expect(calls[0]?.input["tool_input"]).toEqual({ command: "touch hooked.txt" })
      expect(Fs.existsSync(Path.join(d.cwd, "hooked.txt"))).toBe(false)
      const followUp = yield* model.awaitRequest(1, FakeModel.isConversation)
      const toolResult = normalized(followUp).at(-1)?.content.find((b) => b["type"] === "tool_result")
      expect(toolResult?.["is_error"]).toBe(true)
      expect(JSON.stringify(toolResult?.["content"])).toContain("blocked by the skein hook")
    }).pipe(Effect.provide(Live.layer)))
})
