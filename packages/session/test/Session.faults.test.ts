/**
 * Faults the real CLI will not produce on demand, driven through the scripted
 * FakeCli child: garbage on stdout, a crash mid-turn, cancelled and
 * unanswered requests, an ignored SIGTERM, a silent CLI.
 */
import { describe, expect, it } from "@effect/vitest"
import { ProcessHost, ProcessJournal } from "@skein/kernel"
import { FakeCli } from "@skein/testkit"
import { Deferred, Effect, Fiber, Layer, Queue, Stream, TestClock } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Permissions from "../src/Permissions.js"
import * as Session from "../src/Session.js"
import type { TurnError } from "../src/SessionError.js"
import { fake } from "./fake.js"
import type { SessionEvent } from "../src/Turn.js"

const host = ProcessHost.layerMemory()

const tempDir = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-faults-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

/** The JSON lines FakeCli recorded from its stdin. */
const recorded = (file: string): ReadonlyArray<Record<string, unknown>> =>
  Fs.readFileSync(file, "utf8").split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l))

/** Gone: no such process, or a zombie. */
const isGone = (pid: number): boolean => !ProcessHost.isAlive(pid)

/** Collects a turn's events and how its stream ended. */
const drain = (events: Stream.Stream<SessionEvent, TurnError>) =>
  Effect.gen(function*() {
    const seen: Array<SessionEvent> = []
    const end = yield* Stream.runForEach(events, (e) => Effect.sync(() => seen.push(e))).pipe(Effect.either)
    return { seen, end }
  })

const messageTypes = (events: ReadonlyArray<SessionEvent>) =>
  events.flatMap((e) => e._tag === "Message" ? [e.message.type] : [])

describe("Session faults (FakeCli)", () => {
  it.scopedLive("malformed and unknown lines pass through as events, and later turns still work", () =>
    Effect.gen(function*() {
      const session = yield* Session.start(fake([
        ...FakeCli.textTurn("first answer", {
          during: [
            FakeCli.line("{\"type\":\"assistant\",\"message\":"),
            FakeCli.line("[1,2,3]"),
            FakeCli.emit({ type: "fake_unknown_type", detail: 1 }),
            FakeCli.emit({ type: "system", subtype: "fake_future_subtype", detail: 2 }),
            FakeCli.emit({ type: "assistant", message: 42 })
          ]
        }),
        ...FakeCli.textTurn("second answer"),
        FakeCli.waitForEnd
      ]))
      const bus = yield* session.subscribe
      const first = yield* session.send("one")
      const { end, seen } = yield* drain(first.events)
      expect(end._tag).toBe("Right")
      expect((yield* first.result).text).toBe("first answer")

      const oddities = seen.filter((e) => e._tag !== "Message").map((e) =>
        e._tag === "Unknown" ? `Unknown ${e.type}/${e.subtype ?? ""}` : e._tag === "Malformed" ? `Malformed ${e.type}` : e._tag
      )
      expect(oddities).toEqual([
        "Unparseable",
        "Unparseable",
        "Unknown fake_unknown_type/",
        "Unknown system/fake_future_subtype",
        "Malformed assistant"
      ])
      // The bus saw the same, in the same order.
      const published = Array.from(yield* Queue.takeAll(bus))
      expect(published.filter((e) => e._tag !== "Message").map((e) => e._tag)).toEqual(
        seen.filter((e) => e._tag !== "Message").map((e) => e._tag)
      )

      const second = yield* Effect.flatMap(session.send("two"), (t) => t.result)
      expect(second.text).toBe("second answer")
      expect((yield* session.state.get).counters.results).toBe(2)
    }).pipe(Effect.provide(host)))

  for (
    const [name, how, expected] of [
      ["exit code 3", { code: 3 }, { code: 3, signal: null }],
      ["SIGKILL", { signal: "SIGKILL" }, { code: null, signal: "SIGKILL" }]
    ] as const
  ) {
    it.scopedLive(`a crash mid-turn (${name}) fails the turn, its events, pending requests and queued turns with CliExited`, () =>
      Effect.gen(function*() {
        const session = yield* Session.start(fake([
          // Hold the host's mcp_status unanswered, then crash inside the first turn.
          FakeCli.waitFor("control_request", { subtype: "mcp_status" }),
          ...FakeCli.crashMidTurn(how)
        ]))
        const pendingRequest = yield* Effect.fork(session.mcpStatus)
        const first = yield* session.send("build it")
        const queued = yield* session.send("then this")

        const failure = yield* Effect.flip(first.result)
        expect(failure._tag).toBe("CliExited")
        if (failure._tag !== "CliExited") return
        expect({ code: failure.code, signal: failure.signal }).toEqual(expected)
        expect(failure.stderrTail).toContain("fake-cli: crashing mid-turn")

        const { end, seen } = yield* drain(first.events)
        // What arrived before the crash was delivered, then the stream failed the same way.
        expect(messageTypes(seen)).toEqual(["system", "assistant"])
        expect(end._tag === "Left" ? end.left : undefined).toEqual(failure)

        expect(yield* Effect.flip(Fiber.join(pendingRequest))).toEqual(failure)
        expect(yield* Effect.flip(queued.result)).toEqual(failure)
        expect(yield* Effect.flip(Effect.flatMap(queued.events.pipe(Stream.runDrain), () => Effect.void))).toEqual(failure)

        // A send after the crash says why the session ended.
        expect(yield* Effect.flip(session.send("anyone?"))).toEqual(failure)
        const lateRequest = yield* Effect.flip(session.setModel("other"))
        expect(lateRequest).toEqual(failure)
        expect((yield* session.state.get).status).toBe("exited")
        const status = yield* session.exit
        expect({ code: status.code, signal: status.signal }).toEqual(expected)
      }).pipe(Effect.provide(host)))
  }

  it.scopedLive("control_cancel_request interrupts the permission handler, and no response is written for it", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const responses = Path.join(dir, "responses.jsonl")
      const started = yield* Deferred.make<string>()
      const interrupted = yield* Deferred.make<string>()
      const policy = Permissions.layer((request) =>
        Deferred.succeed(started, request.requestId).pipe(
          Effect.zipRight(Effect.never),
          Effect.onInterrupt(() => Deferred.succeed(interrupted, request.requestId))
        )
      )
      // The probe request comes after the cancel: the first control_response
      // the host writes must be the probe's.
      const session = yield* Session.start(fake([
        ...FakeCli.textTurn("cancelled, moving on", {
          during: [
            FakeCli.emit({
              type: "control_request",
              request_id: "req_perm",
              request: {
                subtype: "can_use_tool",
                tool_name: "Bash",
                input: { command: "rm -rf build" },
                tool_use_id: "toolu_perm",
                permission_suggestions: []
              }
            }),
            FakeCli.sleep(300),
            FakeCli.emit({ type: "control_cancel_request", request_id: "req_perm" }),
            FakeCli.emit({
              type: "control_request",
              request_id: "req_probe",
              request: { subtype: "mcp_message", server_name: "probe", message: { jsonrpc: "2.0", method: "ping" } }
            }),
            FakeCli.waitFor("control_response", { record: responses })
          ]
        }),
        FakeCli.waitForEnd
      ])).pipe(Effect.provide(policy))

      const turn = yield* session.send("clean up")
      expect(yield* Deferred.await(started)).toBe("req_perm")
      expect(yield* Deferred.await(interrupted)).toBe("req_perm")
      // The script goes on past the probe only once it has recorded the first response.
      expect((yield* turn.result).text).toBe("cancelled, moving on")
      expect((yield* session.state.get).pendingPermissions).toEqual([])
      const [first] = recorded(responses)
      expect(first?.["type"]).toBe("control_response")
      expect(first?.["response"]).toMatchObject({ subtype: "error", request_id: "req_probe" })
    }).pipe(Effect.provide(host)))

  it.scopedLive("a CLI that ignores SIGTERM is SIGKILLed when the session's scope closes", () =>
    Effect.gen(function*() {
      const spawned: Array<ProcessHost.ChildProcess> = []
      const capturing = Layer.scoped(
        ProcessHost.ProcessHost,
        Effect.map(ProcessHost.make(), (inner) =>
          ProcessHost.ProcessHost.of({
            spawn: (options) => Effect.tap(inner.spawn(options), (child) => Effect.sync(() => spawned.push(child)))
          }))
      ).pipe(Layer.provide(ProcessJournal.layerMemory))

      const pid = yield* Effect.gen(function*() {
        const session = yield* Session.start(fake(FakeCli.ignoresSigterm(), {
          stopTimeouts: { stdinGrace: "100 millis", termGrace: "300 millis" }
        }))
        // Its answer to initialize shows the fake is up, with its SIGTERM handler in place.
        yield* session.initialize
        expect(isGone(session.pid)).toBe(false)
        return session.pid
      }).pipe(Effect.scoped, Effect.provide(capturing))

      expect(isGone(pid)).toBe(true)
      expect(spawned.map((c) => c.pid)).toEqual([pid])
      const status = yield* spawned[0]!.await
      expect(status.signal).toBe("SIGKILL")
      // SIGTERM arrived and was ignored before the kill.
      expect(status.stderrTail).toContain("fake-cli: ignored SIGTERM")
    }))

  it.scopedLive("a host request the CLI never answers times out with ControlTimeout and is withdrawn", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const stdin = Path.join(dir, "stdin.jsonl")
      const session = yield* Session.start(fake([
        FakeCli.waitFor("control_request", { subtype: "get_context_usage", record: stdin }),
        FakeCli.waitFor("control_cancel_request", { record: stdin }),
        ...FakeCli.textTurn("still here"),
        FakeCli.waitForEnd
      ]))
      const error = yield* Effect.flip(session.request({ subtype: "get_context_usage" }, { timeout: "300 millis" }))
      expect(error._tag).toBe("ControlTimeout")
      if (error._tag !== "ControlTimeout") return
      expect(error.subtype).toBe("get_context_usage")
      expect(error.timeoutMillis).toBe(300)

      // The script reaches the turn only after it read the cancel.
      expect((yield* Effect.flatMap(session.send("hi"), (t) => t.result)).text).toBe("still here")
      const [request, cancel] = recorded(stdin)
      expect(request).toMatchObject({ type: "control_request", request_id: error.requestId })
      expect(cancel).toEqual({ type: "control_cancel_request", request_id: error.requestId })
    }).pipe(Effect.provide(host)))

  it.scopedLive("a control_request of an unknown subtype (and mcp_message) gets an unsupported_request error", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const stdin = Path.join(dir, "stdin.jsonl")
      const session = yield* Session.start(fake([
        FakeCli.emit({ type: "control_request", request_id: "req_future", request: { subtype: "fake_future_request", x: 1 } }),
        FakeCli.waitFor("control_response", { requestId: "req_future", record: stdin }),
        FakeCli.emit({
          type: "control_request",
          request_id: "req_mcp",
          request: { subtype: "mcp_message", server_name: "sdk", message: { jsonrpc: "2.0", method: "ping" } }
        }),
        FakeCli.waitFor("control_response", { requestId: "req_mcp", record: stdin }),
        ...FakeCli.textTurn("answered both"),
        FakeCli.waitForEnd
      ]))
      expect((yield* Effect.flatMap(session.send("hi"), (t) => t.result)).text).toBe("answered both")
      const responses = recorded(stdin).map((m) => m["response"])
      expect(responses).toHaveLength(2)
      expect(responses[0]).toMatchObject({ subtype: "error", request_id: "req_future" })
      expect(responses[1]).toMatchObject({ subtype: "error", request_id: "req_mcp" })
      for (const response of responses) {
        expect(JSON.stringify(response)).toContain("unsupported_request")
      }
    }).pipe(Effect.provide(host)))

  it.scoped("the silence watchdog fails a silent session with SessionSilent", () =>
    Effect.gen(function*() {
      const session = yield* Session.start(fake(FakeCli.hang(), { silenceTimeout: "10 seconds" }))
      const turn = yield* session.send("hello?")
      const result = yield* Effect.fork(turn.result)
      yield* TestClock.adjust("1 minute")
      const error = yield* Effect.flip(Fiber.join(result))
      expect(error._tag).toBe("SessionSilent")
      expect(yield* Effect.flip(session.send("again"))).toMatchObject({ _tag: "SessionSilent" })
      // The watchdog killed the CLI.
      const status = yield* session.exit
      expect(status.signal).toBe("SIGKILL")
    }).pipe(Effect.provide(host)))

  it.scoped("a turn whose running state never came still ends at the idle after its result", () =>
    Effect.gen(function*() {
      const isRunning = (step: FakeCli.Step) =>
        step._tag === "Emit" && JSON.stringify(step.message).includes(`"state":"running"`)
      const script = FakeCli.textTurn("no running here").filter((step) => !isRunning(step))
      expect(script.length).toBe(FakeCli.textTurn("no running here").length - 1)
      const session = yield* Session.start(fake([...script, FakeCli.waitForEnd]))
      const summary = yield* Effect.flatMap(session.send("hi"), (turn) => turn.result)
      expect(summary.text).toBe("no running here")
    }).pipe(Effect.provide(host)))
})
