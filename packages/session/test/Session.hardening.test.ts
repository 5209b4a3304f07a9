/**
 * The session's edges, one test per failure of the hardening issue, driven
 * through FakeCli (and plain `node -e` stand-ins) for what the real CLI will
 * not do on demand. Bounds are failure conditions (`Effect.timeout` around a
 * wait that used to hang), never assertions about how long something took.
 */
import { describe, expect, it } from "@effect/vitest"
import { ProcessHost } from "@skein/kernel"
import { FakeCli } from "@skein/testkit"
import { Deferred, type Duration, Effect, Exit, Fiber, Option, Queue, Scope, TestClock } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Permissions from "../src/Permissions.js"
import * as Session from "../src/Session.js"
import type { SessionEvent } from "../src/Turn.js"
import { fake } from "./fake.js"

const host = ProcessHost.layerMemory()

const tempDir = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-hardening-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

const recorded = (file: string): ReadonlyArray<Record<string, unknown>> =>
  Fs.existsSync(file)
    ? Fs.readFileSync(file, "utf8").split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l))
    : []

/** Waits for the first bus event that matches; the bus must be subscribed before the event can come. */
const awaitEvent = (bus: Queue.Dequeue<SessionEvent>, pred: (event: SessionEvent) => boolean) =>
  Queue.take(bus).pipe(Effect.repeat({ until: pred }))

const isState = (state: string) => (event: SessionEvent) =>
  event._tag === "Message" && event.message.type === "system" && event.message.subtype === "session_state_changed" &&
  event.message.state === state

/** Closes `scope` and fails with `TimeoutException` if closing takes longer than `bound`, without waiting for it. */
const closeWithin = (scope: Scope.CloseableScope, bound: Duration.DurationInput) =>
  Scope.close(scope, Exit.void).pipe(Effect.disconnect, Effect.timeout(bound))

const stopTimeouts = { stdinGrace: "200 millis", termGrace: "300 millis" } as const

describe("Session hardening", () => {
  it.scopedLive("failure 1: closing a session whose CLI ignores interrupt, stdin's end and SIGTERM finishes, and no process is left", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const session = yield* Session.start(fake(FakeCli.ignoresEverything(), { stopTimeouts })).pipe(Scope.extend(scope))
      const bus = yield* session.subscribe.pipe(Scope.extend(scope))
      const turn = yield* session.send("take your time")
      yield* awaitEvent(bus, isState("running"))
      // stdinGrace + termGrace is 0.5 s here, plus at most stdinGrace for the interrupt: 4 s is a generous bound.
      yield* closeWithin(scope, "4 seconds")
      expect(ProcessHost.isAlive(session.pid)).toBe(false)
      expect((yield* Effect.flip(turn.result))._tag).toBe("SessionClosed")
    }).pipe(Effect.provide(host)))

  it.scopedLive("failure 1: the issue's repro — a 'CLI' that reads nothing — closes too", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const session = yield* Session.start({
        cwd: Os.tmpdir(),
        executable: process.execPath,
        executableArgs: ["-e", "setInterval(() => {}, 1000)"],
        stopTimeouts
      }).pipe(Scope.extend(scope))
      yield* session.send("hello")
      yield* closeWithin(scope, "4 seconds")
      expect(ProcessHost.isAlive(session.pid)).toBe(false)
    }).pipe(Effect.provide(host)))

  it.scopedLive("failure 2: a leader that exits while a descendant holds stdout fails the turn with CliExited", () =>
    Effect.gen(function*() {
      const session = yield* Session.start(
        fake(FakeCli.leaderExitsHoldingStdout({ code: 3, stderrText: "leader gone\n" }), { stopTimeouts, exitDrain: "300 millis" })
      )
      const turn = yield* session.send("go")
      // The holder keeps stdout open for 30 s; the exit must be seen long before that.
      const error = yield* Effect.flip(turn.result).pipe(Effect.timeout("8 seconds"))
      expect(error).toMatchObject({ _tag: "CliExited", code: 3 })
      expect(error._tag === "CliExited" ? error.stderrTail : "").toContain("leader gone")
      expect(yield* Effect.flip(session.send("again"))).toMatchObject({ _tag: "CliExited", code: 3 })
    }).pipe(Effect.provide(host)))

  /** Starts a session on a CLI that exits at once; how `initialize` and the first turn fail, `runs` times. */
  const exitAtOnce = (options: Session.SessionOptions, runs: number) =>
    Effect.forEach(Array.from({ length: runs }), () =>
      Effect.scoped(Effect.gen(function*() {
        const session = yield* Session.start(options)
        const init = yield* Effect.flip(session.initialize)
        const first = yield* session.send("hi").pipe(Effect.flatMap((t) => t.result), Effect.flip)
        return [init, first]
      })))

  it.scopedLive("failure 3: a CLI that exits at once fails initialize and the first turn with CliExited, code and stderr", () =>
    Effect.gen(function*() {
      const outcomes = yield* exitAtOnce(fake(FakeCli.exitsAtOnce({ code: 1, stderrText: "error: unknown option '--fake'\n" })), 3)
      for (const error of outcomes.flat()) {
        expect(error).toMatchObject({ _tag: "CliExited", code: 1 })
        expect(error._tag === "CliExited" ? error.stderrTail : "").toContain("unknown option")
      }
    }).pipe(Effect.provide(host)))

  it.scopedLive("failure 3: the issue's repro — `sh -c \"echo error >&2; exit 1\"` — fails with its code and stderr, not an empty SessionClosed", () =>
    Effect.gen(function*() {
      // The CLI's own flags follow the script and land in $0, $1, … of it.
      const outcomes = yield* exitAtOnce({ cwd: Os.tmpdir(), executable: "sh", executableArgs: ["-c", "echo error >&2; exit 1"], stopTimeouts }, 5)
      for (const error of outcomes.flat()) {
        expect(error).toMatchObject({ _tag: "CliExited", code: 1 })
        expect(error._tag === "CliExited" ? error.stderrTail : "").toContain("error")
      }
    }).pipe(Effect.provide(host)))

  it.scopedLive("failure 4: a CLI that prints no session_state_changed (the 2.0 line) ends each turn at its result", () =>
    Effect.gen(function*() {
      const session = yield* Session.start(fake([
        ...FakeCli.legacyTextTurn("first"),
        ...FakeCli.legacyPermissionTurn(),
        ...FakeCli.legacyTextTurn("third"),
        FakeCli.waitForEnd
      ])).pipe(Effect.provide(Permissions.allowTools(["Bash"])))
      const turns = yield* Effect.all([session.send("one"), session.send("two"), session.send("three")])
      const summaries = yield* Effect.forEach(turns, (t) => t.result).pipe(Effect.timeout("10 seconds"))
      expect(summaries.map((s) => s.text)).toEqual(["first", "Created skein.txt.", "third"])
      expect(summaries.map((s) => s.endReason)).toEqual(["result", "result", "result"])
    }).pipe(Effect.provide(host)))

  it.scoped("failure 5: a background task that never ends holds its turn only up to backgroundWait, and never a later turn", () =>
    Effect.gen(function*() {
      const first = FakeCli.backgroundTaskNeverEnds({ taskId: "b7devsrv1" })
      const session = yield* Session.start(fake([...first.slice(0, -1), ...FakeCli.textTurn("second answer"), FakeCli.waitForEnd], {
        backgroundWait: "10 minutes"
      }))
      const bus = yield* session.subscribe
      const turn = yield* session.send("start the dev server")
      const result = yield* Effect.fork(turn.result)
      yield* awaitEvent(bus, isState("idle"))
      // The CLI is idle, the task runs on: the turn waits, for backgroundWait only.
      expect(Option.isNone(yield* Fiber.poll(result))).toBe(true)
      yield* TestClock.adjust("10 minutes")
      const summary = yield* Fiber.join(result)
      expect(summary.endReason).toBe("backgroundWait")
      expect(summary.liveTasks).toEqual(["b7devsrv1"])
      expect(summary.text).toBe("The dev server is running in the background.")
      // The task still runs, and the next turn ends at its own idle.
      const next = yield* Effect.flatMap(session.send("anything else?"), (t) => t.result)
      expect(next.text).toBe("second answer")
      expect(next.endReason).toBe("idle")
      expect((yield* session.state.get).backgroundTasks.map((t) => t.taskId)).toEqual(["b7devsrv1"])
    }).pipe(Effect.provide(host)))

  it.scoped("failure 5: a follow-up the CLI starts after its turn ended is a turn of its own, origin cli, on session.turns", () =>
    Effect.gen(function*() {
      const session = yield* Session.start(fake(FakeCli.cliInitiatedPermission({ delayMillis: 1500 }), { backgroundWait: "1 minute" }))
        .pipe(Effect.provide(Permissions.allowTools(["Bash"])))
      const bus = yield* session.subscribe
      const announced = yield* session.turns
      const turn = yield* session.send("build it in the background")
      const result = yield* Effect.fork(turn.result)
      yield* awaitEvent(bus, isState("idle"))
      yield* TestClock.adjust("1 minute")
      expect((yield* Fiber.join(result)).endReason).toBe("backgroundWait")
      expect((yield* Queue.take(announced)).origin).toBe("host")
      const followUp = yield* Queue.take(announced)
      expect(followUp.origin).toBe("cli")
      const summary = yield* followUp.result
      expect(summary.origin).toBe("cli")
      expect(summary.text).toBe("The build finished; I marked it deployed.")
    }).pipe(Effect.provide(host)))

  it.scopedLive("failure 6: a queued send waits while a CLI-initiated follow-up waits on a permission", () =>
    Effect.gen(function*() {
      const decided = yield* Deferred.make<void>()
      const asked = yield* Deferred.make<void>()
      const policy = Permissions.layer(() =>
        Deferred.succeed(asked, undefined).pipe(Effect.zipRight(Deferred.await(decided)), Effect.as(Permissions.allow()))
      )
      const script = FakeCli.cliInitiatedPermission({ delayMillis: 100 })
      const session = yield* Session.start(fake([...script.slice(0, -1), ...FakeCli.textTurn("next answer"), FakeCli.waitForEnd], {
        backgroundWait: "50 millis"
      })).pipe(Effect.provide(policy))
      const announced = yield* session.turns
      const first = yield* Effect.flatMap(session.send("build it in the background"), (t) => t.result)
      expect(first.endReason).toBe("backgroundWait")
      yield* Deferred.await(asked)
      // The follow-up waits on the host's answer: `requires_action` is not idle.
      const next = yield* session.send("what next?")
      const turns = yield* Queue.takeAll(announced)
      expect([...turns].map((t) => t.origin)).toEqual(["host", "cli"])
      yield* Deferred.succeed(decided, undefined)
      const followUp = yield* [...turns][1]!.result
      expect(followUp.text).toBe("The build finished; I marked it deployed.")
      const summary = yield* next.result
      expect(summary.text).toBe("next answer")
      expect(summary.results).toHaveLength(1)
    }).pipe(Effect.provide(host)))

  it.scopedLive("failure 7: interrupting the caller of a request withdraws it, as a timeout does", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const stdin = Path.join(dir, "stdin.jsonl")
      const session = yield* Session.start(fake([
        FakeCli.waitFor("control_request", { subtype: "mcp_status", record: stdin }),
        FakeCli.waitFor("control_cancel_request", { record: stdin }),
        ...FakeCli.textTurn("still here"),
        FakeCli.waitForEnd
      ]))
      const outcome = yield* session.mcpStatus.pipe(Effect.timeout("300 millis"), Effect.either)
      expect(outcome._tag === "Left" ? outcome.left._tag : "answered").toBe("TimeoutException")
      // The script reaches the turn only once it has read the cancel.
      expect((yield* Effect.flatMap(session.send("hi"), (t) => t.result)).text).toBe("still here")
      const [request, cancel] = recorded(stdin)
      expect(cancel).toEqual({ type: "control_cancel_request", request_id: request?.["request_id"] })
    }).pipe(Effect.provide(host)))

  it.scoped("failure 8: the silence watchdog leaves an idle session alone between turns", () =>
    Effect.gen(function*() {
      const session = yield* Session.start(fake([
        ...FakeCli.textTurn("first"),
        ...FakeCli.textTurn("second"),
        FakeCli.waitForEnd
      ], { silenceTimeout: "10 seconds" }))
      expect((yield* Effect.flatMap(session.send("one"), (t) => t.result)).text).toBe("first")
      yield* TestClock.adjust("2 minutes")
      expect((yield* session.state.get).status).toBe("idle")
      expect((yield* Effect.flatMap(session.send("two"), (t) => t.result)).text).toBe("second")
    }).pipe(Effect.provide(host)))

  it.scoped("failure 8 (the other side): silence still counts while a turn waits on the CLI", () =>
    Effect.gen(function*() {
      const session = yield* Session.start(fake(FakeCli.ignoresInterrupt(), { silenceTimeout: "10 seconds" }))
      const bus = yield* session.subscribe
      const turn = yield* session.send("hello?")
      yield* awaitEvent(bus, (e) => e._tag === "Message" && e.message.type === "assistant")
      yield* TestClock.adjust("1 minute")
      expect((yield* Effect.flip(turn.result))._tag).toBe("SessionSilent")
    }).pipe(Effect.provide(host)))

  it.scopedLive("failure 11: with no Permissions service the CLI is asked over the bus, and the host denies naming what is missing", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const stdin = Path.join(dir, "stdin.jsonl")
      const session = yield* Session.start(fake([
        ...FakeCli.legacyPermissionTurn({ requestId: "req_no_handler", record: stdin }),
        FakeCli.waitForEnd
      ]))
      const turn = yield* session.send("make a file")
      yield* turn.result
      const [answer] = recorded(stdin)
      expect(answer).toMatchObject({ type: "control_response", response: { subtype: "success", request_id: "req_no_handler" } })
      const response = answer?.["response"]
      const decision = typeof response === "object" && response !== null && "response" in response ? response.response : undefined
      expect(decision).toMatchObject({ behavior: "deny" })
      expect(JSON.stringify(decision)).toContain("no permission handler")
      expect(JSON.stringify(decision)).toContain("Permissions service")
    }).pipe(Effect.provide(host)))
})
