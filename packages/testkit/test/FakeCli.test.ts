import { describe, expect, it } from "@effect/vitest"
import { Data, Deferred, Duration, Effect, Queue } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { CliMessage, Lenient } from "@skein/protocol"
import * as FakeCli from "@skein/testkit/FakeCli"
import * as TsChild from "@skein/testkit/TsChild"

class ChildError extends Data.TaggedError("ChildError")<{ readonly message: string }> {}

interface ExitStatus {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

/** A spawned fake with its output collected; killed with SIGKILL when the scope closes. */
const spawnFake = (script: FakeCli.Script | string, runner?: TsChild.Runner) =>
  Effect.gen(function*() {
    const { args, command, env } = FakeCli.command(script, runner === undefined ? {} : { runner })
    const exited = yield* Deferred.make<ExitStatus>()
    /** The leader's own exit, which may come before stdout's end ('close'). */
    const leaderExited = yield* Deferred.make<ExitStatus>()
    const changed = yield* Queue.sliding<void>(1)
    const stdout: Array<Buffer> = []
    const stderr: Array<Buffer> = []
    const child = yield* Effect.acquireRelease(
      Effect.sync((): ChildProcess => {
        const child = spawn(command, args, {
          env: { ...process.env, ...env },
          cwd: os.tmpdir(),
          stdio: ["pipe", "pipe", "pipe"]
        })
        child.stdout!.on("data", (chunk: Buffer) => {
          stdout.push(chunk)
          changed.unsafeOffer(undefined)
        })
        child.stderr!.on("data", (chunk: Buffer) => {
          stderr.push(chunk)
          changed.unsafeOffer(undefined)
        })
        child.stdin!.on("error", () => undefined)
        child.on("exit", (code, signal) => {
          Deferred.unsafeDone(leaderExited, Effect.succeed({ code, signal }))
          changed.unsafeOffer(undefined)
        })
        child.on("close", (code, signal) => {
          Deferred.unsafeDone(exited, Effect.succeed({ code, signal }))
          changed.unsafeOffer(undefined)
        })
        return child
      }),
      (child) =>
        Effect.gen(function*() {
          if (!(yield* Deferred.isDone(exited))) {
            child.kill("SIGKILL")
            yield* Deferred.await(exited)
          }
        })
    )
    const out = () => Buffer.concat(stdout)
    const err = () => Buffer.concat(stderr).toString("utf8")

    /** Waits until `predicate` holds on the output so far; fails if the child exits first. */
    const waitUntil = (what: string, predicate: () => boolean) =>
      Effect.gen(function*() {
        while (!predicate()) {
          if (yield* Deferred.isDone(exited)) {
            return yield* new ChildError({ message: `exited before ${what}; stdout=${out()} stderr=${err()}` })
          }
          yield* Queue.take(changed)
        }
      }).pipe(
        Effect.timeoutFail({
          duration: Duration.seconds(30),
          onTimeout: () => new ChildError({ message: `timed out waiting for ${what}; stdout=${out()}` })
        })
      )

    const lines = () =>
      out().toString("utf8").split("\n").filter((l) => l.length > 0).map((l): unknown => JSON.parse(l))

    return {
      child,
      out,
      err,
      lines,
      exit: Deferred.await(exited),
      leaderExit: Deferred.await(leaderExited),
      closed: Deferred.isDone(exited),
      send: (message: unknown) => Effect.sync(() => child.stdin!.write(`${JSON.stringify(message)}\n`)),
      closeStdin: Effect.sync(() => child.stdin!.end()),
      kill: (signal: NodeJS.Signals) => Effect.sync(() => child.kill(signal)),
      waitForStdout: (text: string) => waitUntil(`stdout ${text}`, () => out().includes(text)),
      waitForStderr: (text: string) => waitUntil(`stderr ${text}`, () => err().includes(text)),
      waitForLines: (count: number) =>
        waitUntil(`${count} lines`, () => out().toString("utf8").split("\n").length > count)
    }
  })

type Fake = Effect.Effect.Success<ReturnType<typeof spawnFake>>

const initialize = (requestId: string) => ({
  type: "control_request",
  request_id: requestId,
  request: { subtype: "initialize", hooks: {} }
})

const userMessage = (text: string) => ({
  type: "user",
  message: { role: "user", content: text },
  parent_tool_use_id: null,
  session_id: ""
})

/** Sends initialize and waits for the fake's answer: proof it is alive and reading stdin. */
const roundTrip = (fake: Fake, requestId: string) =>
  Effect.gen(function*() {
    yield* fake.send(initialize(requestId))
    yield* fake.waitForStdout(`"request_id":"${requestId}"`)
  })

const interrupt = (requestId: string) => ({
  type: "control_request",
  request_id: requestId,
  request: { subtype: "interrupt" }
})

/** Every stdout line of `fake` decoded: all must be known messages, none Unknown or Malformed. */
const decodedTypes = (fake: Fake) =>
  Lenient.decodeAll(CliMessage.decoder, fake.out()).map((decoded) => decoded._tag)

/** The pid the fake printed for its stdout holder. */
const holderPid = (fake: Fake): number => Number(/holder pid (\d+)/.exec(fake.err())?.[1])

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null

const field = (u: unknown, key: string): unknown => (isRecord(u) ? u[key] : undefined)

const typeOf = (u: unknown) => {
  const subtype = field(u, "subtype") ?? field(field(u, "request"), "subtype") ?? field(field(u, "response"), "subtype")
  const state = field(u, "state")
  return [field(u, "type"), subtype, state].filter((x) => x !== undefined).join("/")
}

describe("FakeCli", () => {
  it.scoped("writes raw lines byte-exact, including invalid UTF-8 and a partial last line", () =>
    Effect.gen(function*() {
      const bytes = Uint8Array.from([0x7b, 0x22, 0xff, 0xc3, 0x0a, 0xe2, 0x82])
      const fake = yield* spawnFake([
        FakeCli.line("{\"type\":\"assistant\""),
        FakeCli.raw(bytes),
        FakeCli.emit({ type: "x", text: "héllo ✓" }),
        FakeCli.raw("no newline")
      ])
      const status = yield* fake.exit
      expect(status).toEqual({ code: 0, signal: null })
      expect(fake.out()).toEqual(
        Buffer.concat([
          Buffer.from("{\"type\":\"assistant\"\n"),
          Buffer.from(bytes),
          Buffer.from("{\"type\":\"x\",\"text\":\"héllo ✓\"}\n"),
          Buffer.from("no newline")
        ])
      )
    }))

  it.scoped("malformedLines ends in a partial line and keeps good lines intact", () =>
    Effect.gen(function*() {
      const fake = yield* spawnFake(FakeCli.malformedLines())
      expect(yield* fake.exit).toEqual({ code: 0, signal: null })
      const text = fake.out().toString("latin1")
      const rows = text.split("\n")
      expect(rows.at(-1)).toBe("{\"type\":\"result\",\"subtype\":\"succ")
      expect(fake.out().includes(Buffer.from([0xff, 0xfe]))).toBe(true)
      expect(() => JSON.parse(rows[1]!)).toThrow()
      expect(field(JSON.parse(rows[0]!), "subtype")).toBe("init")
    }))

  it.scoped("writes a huge line of exactly N bytes", () =>
    Effect.gen(function*() {
      const n = 3 * 1024 * 1024
      const fake = yield* spawnFake([FakeCli.huge(n), FakeCli.huge(10, { json: false })])
      expect(yield* fake.exit).toEqual({ code: 0, signal: null })
      const [first, second, rest] = fake.out().toString("utf8").split("\n")
      expect(Buffer.byteLength(first!)).toBe(n)
      expect(field(JSON.parse(first!), "type")).toBe("fake_padding")
      expect(second).toBe("xxxxxxxxxx")
      expect(rest).toBe("")
    }))

  it.scoped("waits for a stdin message before going on, and answers initialize meanwhile", () =>
    Effect.gen(function*() {
      const fake = yield* spawnFake([
        FakeCli.emit({ type: "before" }),
        FakeCli.waitFor("user", { echo: true }),
        FakeCli.emit({ type: "after" })
      ])
      yield* fake.waitForStdout("before")
      // The answer comes after "before" was written, and "after" has not come.
      yield* roundTrip(fake, "init-1")
      expect(fake.out().toString()).not.toContain("after")
      yield* fake.send(userMessage("go"))
      expect(yield* fake.exit).toEqual({ code: 0, signal: null })
      expect(fake.lines().map(typeOf)).toEqual(["before", "control_response/success", "user", "after"])
      const response = fake.lines()[1]
      expect(field(field(response, "response"), "request_id")).toBe("init-1")
      expect(field(field(field(response, "response"), "response"), "models")).toBeInstanceOf(Array)
    }))

  it.scoped("answers interrupt, and can wait for a control_response by request id", () =>
    Effect.gen(function*() {
      const fake = yield* spawnFake([
        FakeCli.emit({ type: "control_request", request_id: "cli-1", request: { subtype: "hook_callback" } }),
        FakeCli.waitFor("control_response", { requestId: "cli-1", subtype: "success" }),
        FakeCli.emit({ type: "answered" })
      ])
      yield* fake.waitForStdout("cli-1")
      yield* fake.send({ type: "control_request", request_id: "int-1", request: { subtype: "interrupt" } })
      yield* fake.waitForStdout("int-1")
      // A response to another request does not release the wait.
      yield* fake.send({ type: "control_response", response: { subtype: "success", request_id: "other" } })
      yield* roundTrip(fake, "init-2")
      expect(fake.out().toString()).not.toContain("answered")
      yield* fake.send({ type: "control_response", response: { subtype: "success", request_id: "cli-1" } })
      expect(yield* fake.exit).toEqual({ code: 0, signal: null })
      expect(fake.lines().map(typeOf)).toEqual([
        "control_request/hook_callback",
        "control_response/success",
        "control_response/success",
        "answered"
      ])
    }))

  it.scoped("exits 0 when stdin ends during a wait", () =>
    Effect.gen(function*() {
      const fake = yield* spawnFake([FakeCli.waitFor("user"), FakeCli.emit({ type: "never" })])
      yield* roundTrip(fake, "init-3")
      yield* fake.closeStdin
      expect(yield* fake.exit).toEqual({ code: 0, signal: null })
      expect(fake.out().toString()).not.toContain("never")
    }))

  it.scoped("crashMidTurn exits with the given code after the turn started", () =>
    Effect.gen(function*() {
      const fake = yield* spawnFake(FakeCli.crashMidTurn({ code: 3 }))
      yield* fake.send(userMessage("build it"))
      expect(yield* fake.exit).toEqual({ code: 3, signal: null })
      expect(fake.lines().map(typeOf)).toEqual(["system/init", "assistant"])
      expect(fake.err()).toContain("crashing mid-turn")
    }))

  it.scoped("crashMidTurn dies by the given signal", () =>
    Effect.gen(function*() {
      const fake = yield* spawnFake(FakeCli.crashMidTurn({ signal: "SIGSEGV" }))
      yield* fake.send(userMessage("build it"))
      expect(yield* fake.exit).toEqual({ code: null, signal: "SIGSEGV" })
    }))

  it.scoped("hang dies to SIGTERM", () =>
    Effect.gen(function*() {
      const fake = yield* spawnFake(FakeCli.hang())
      yield* fake.waitForStdout("\"init\"")
      yield* fake.closeStdin
      yield* fake.kill("SIGTERM")
      expect(yield* fake.exit).toEqual({ code: null, signal: "SIGTERM" })
    }))

  it.scoped("ignoresSigterm survives SIGTERM and dies to SIGKILL", () =>
    Effect.gen(function*() {
      const fake = yield* spawnFake(FakeCli.ignoresSigterm())
      yield* fake.waitForStdout("\"init\"")
      yield* fake.kill("SIGTERM")
      yield* fake.waitForStderr("ignored SIGTERM")
      yield* roundTrip(fake, "after-term")
      expect(fake.child.exitCode).toBe(null)
      yield* fake.kill("SIGKILL")
      expect(yield* fake.exit).toEqual({ code: null, signal: "SIGKILL" })
    }))

  it.scoped("permissionThenCancel asks, withdraws the same request, and ends the turn", () =>
    Effect.gen(function*() {
      const fake = yield* spawnFake(FakeCli.permissionThenCancel({ requestId: "perm-9" }))
      yield* fake.send(userMessage("clean up"))
      yield* fake.waitForStdout("\"idle\"")
      yield* fake.closeStdin
      expect(yield* fake.exit).toEqual({ code: 0, signal: null })
      const lines = fake.lines()
      expect(lines.map(typeOf)).toEqual([
        "system/init",
        "assistant",
        "system/session_state_changed/requires_action",
        "control_request/can_use_tool",
        "control_cancel_request",
        "user",
        "result/error_during_execution",
        "system/session_state_changed/idle"
      ])
      expect(field(lines[3], "request_id")).toBe("perm-9")
      expect(field(lines[4], "request_id")).toBe("perm-9")
    }))

  it.scoped("backgroundTaskWithLateResult sends two results before idle", () =>
    Effect.gen(function*() {
      const fake = yield* spawnFake(FakeCli.backgroundTaskWithLateResult({ sessionId: "sess-bg" }))
      yield* fake.send(userMessage("find todos"))
      yield* fake.waitForStdout("\"idle\"")
      yield* fake.closeStdin
      expect(yield* fake.exit).toEqual({ code: 0, signal: null })
      const lines = fake.lines()
      expect(lines.map(typeOf)).toEqual([
        "system/init",
        "system/session_state_changed/running",
        "assistant",
        "system/task_started",
        "user",
        "assistant",
        "result/success",
        "system/task_notification",
        "assistant",
        "result/success",
        "system/session_state_changed/idle"
      ])
      for (const line of lines) expect(field(line, "session_id")).toBe("sess-bg")
      const result = lines[6]
      for (const key of ["is_error", "duration_ms", "num_turns", "result", "total_cost_usd", "usage", "modelUsage"]) {
        expect(result).toHaveProperty(key)
      }
      const uuids = lines.map((line) => field(line, "uuid"))
      expect(new Set(uuids).size).toBe(uuids.length)
    }))

  it.scoped("autoAnswer({ interrupt: false }) leaves interrupt unanswered, yet a wait still sees it", () =>
    Effect.gen(function*() {
      const fake = yield* spawnFake([
        FakeCli.autoAnswer({ interrupt: false }),
        FakeCli.waitFor("control_request", { subtype: "interrupt", echo: true }),
        FakeCli.emit({ type: "saw_interrupt" })
      ])
      yield* fake.send(interrupt("int-unanswered"))
      yield* fake.waitForStdout("saw_interrupt")
      expect(yield* fake.exit).toEqual({ code: 0, signal: null })
      expect(fake.lines().map(typeOf)).toEqual(["control_request/interrupt", "saw_interrupt"])
    }))

  it.scoped("autoAnswer({ initialize: false }) leaves initialize unanswered", () =>
    Effect.gen(function*() {
      const fake = yield* spawnFake([FakeCli.autoAnswer({ initialize: false }), FakeCli.waitFor("user")])
      yield* fake.send(initialize("init-unanswered"))
      yield* fake.send(interrupt("int-answered"))
      yield* fake.waitForStdout("int-answered")
      yield* fake.send(userMessage("done"))
      expect(yield* fake.exit).toEqual({ code: 0, signal: null })
      expect(fake.out().toString()).not.toContain("init-unanswered")
    }))

  it.scoped("ignoresInterrupt runs a turn that never ends, answers initialize but not interrupt, exits at stdin's end", () =>
    Effect.gen(function*() {
      const fake = yield* spawnFake(FakeCli.ignoresInterrupt())
      yield* fake.send(userMessage("work"))
      yield* fake.waitForStdout("Working on it")
      yield* fake.send(interrupt("int-ignored"))
      yield* roundTrip(fake, "init-after-interrupt")
      yield* fake.closeStdin
      expect(yield* fake.exit).toEqual({ code: 0, signal: null })
      expect(fake.out().toString()).not.toContain("int-ignored")
      expect(fake.lines().map(typeOf)).toEqual([
        "system/init",
        "system/session_state_changed/running",
        "assistant",
        "control_response/success"
      ])
    }))

  it.scoped("ignoresEverything outlives interrupt, stdin's end, SIGTERM and SIGINT; SIGKILL ends it", () =>
    Effect.gen(function*() {
      const fake = yield* spawnFake(FakeCli.ignoresEverything())
      yield* fake.send(userMessage("work"))
      yield* fake.waitForStdout("Working on it")
      yield* fake.send(interrupt("int-ignored"))
      yield* fake.closeStdin
      yield* fake.waitForStderr("stdin ended")
      // Each signal is handled after stdin ended: the process is still running.
      yield* fake.kill("SIGTERM")
      yield* fake.waitForStderr("ignored SIGTERM")
      yield* fake.kill("SIGINT")
      yield* fake.waitForStderr("ignored SIGINT")
      expect(fake.out().toString()).not.toContain("int-ignored")
      yield* fake.kill("SIGKILL")
      expect(yield* fake.exit).toEqual({ code: null, signal: "SIGKILL" })
    }))

  it.scoped("leaderExitsHoldingStdout exits with its code while a descendant keeps stdout open", () =>
    Effect.gen(function*() {
      const fake = yield* spawnFake(FakeCli.leaderExitsHoldingStdout({ code: 3, stderrText: "boom\n", holdMillis: 60_000 }))
      yield* fake.send(userMessage("go"))
      expect(yield* fake.leaderExit).toEqual({ code: 3, signal: null })
      const pid = holderPid(fake)
      expect(isAlive(pid)).toBe(true)
      // The holder keeps the pipes open, so stdout has not ended.
      expect(yield* fake.closed).toBe(false)
      expect(fake.err()).toContain("boom")
      expect(fake.lines().map(typeOf)).toEqual(["system/init", "system/session_state_changed/running"])
      process.kill(pid, "SIGKILL")
      expect(yield* fake.exit).toEqual({ code: 3, signal: null })
    }))

  it.scoped("exitsAtOnce writes stderr and exits 1 without answering initialize", () =>
    Effect.gen(function*() {
      const fake = yield* spawnFake(FakeCli.exitsAtOnce({ stderrText: "error: unknown option '--nope'\n" }))
      yield* fake.send(initialize("init-too-late"))
      expect(yield* fake.exit).toEqual({ code: 1, signal: null })
      expect(fake.err()).toContain("unknown option '--nope'")
      expect(fake.out().length).toBe(0)
    }))

  it.scoped("legacyTextTurn and legacyPermissionTurn print 2.0.76 shapes and no session_state_changed", () =>
    Effect.gen(function*() {
      const fake = yield* spawnFake([
        ...FakeCli.legacyTextTurn("First answer."),
        ...FakeCli.legacyPermissionTurn({ requestId: "perm-legacy" }),
        FakeCli.waitForEnd
      ])
      yield* fake.send(userMessage("one"))
      yield* fake.waitForStdout("First answer.\",\"session_id")
      yield* fake.send(userMessage("two"))
      yield* fake.waitForStdout("perm-legacy")
      expect(fake.out().toString()).not.toContain("Created skein.txt.")
      yield* fake.send({ type: "control_response", response: { subtype: "success", request_id: "perm-legacy" } })
      yield* fake.waitForStdout("\"result\":\"Created skein.txt.\"")
      yield* fake.closeStdin
      expect(yield* fake.exit).toEqual({ code: 0, signal: null })
      const lines = fake.lines()
      expect(lines.map(typeOf)).toEqual([
        "system/init",
        "assistant",
        "result/success",
        "system/init",
        "assistant",
        "assistant",
        "control_request/can_use_tool",
        "user",
        "assistant",
        "result/success"
      ])
      expect(field(lines[0], "claude_code_version")).toBe("2.0.76")
      expect(lines[2]).not.toHaveProperty("stop_reason")
      expect(decodedTypes(fake).every((tag) => tag === "Message")).toBe(true)
    }))

  it.scoped("backgroundTaskNeverEnds ends its turn while the task runs, and the task never completes", () =>
    Effect.gen(function*() {
      const fake = yield* spawnFake(FakeCli.backgroundTaskNeverEnds({ taskId: "bdevsrv42" }))
      yield* fake.send(userMessage("start the dev server"))
      yield* fake.waitForStdout("\"idle\"")
      yield* roundTrip(fake, "init-after-idle")
      yield* fake.closeStdin
      expect(yield* fake.exit).toEqual({ code: 0, signal: null })
      const lines = fake.lines()
      expect(lines.map(typeOf)).toEqual([
        "system/session_state_changed/running",
        "system/init",
        "assistant",
        "system/background_tasks_changed",
        "system/task_started",
        "user",
        "assistant",
        "result/success",
        "system/session_state_changed/idle",
        "control_response/success"
      ])
      expect(field(lines[4], "task_id")).toBe("bdevsrv42")
      expect(field(lines[4], "task_type")).toBe("local_bash")
      expect(decodedTypes(fake).every((tag) => tag === "Message")).toBe(true)
    }))

  it.scoped("cliInitiatedPermission starts a follow-up on its own after idle and waits for the permission answer", () =>
    Effect.gen(function*() {
      const fake = yield* spawnFake(FakeCli.cliInitiatedPermission({ requestId: "perm-follow", delayMillis: 50 }))
      yield* fake.send(userMessage("build it in the background"))
      yield* fake.waitForStdout("perm-follow")
      expect(fake.out().toString()).not.toContain("marked it deployed")
      yield* fake.send({
        type: "control_response",
        response: { subtype: "success", request_id: "perm-follow", response: { behavior: "allow", updatedInput: {} } }
      })
      yield* fake.waitForStdout("\"result\":\"The build finished; I marked it deployed.\"")
      yield* fake.waitForLines(23)
      yield* fake.closeStdin
      expect(yield* fake.exit).toEqual({ code: 0, signal: null })
      const lines = fake.lines()
      expect(lines.map(typeOf)).toEqual([
        "system/session_state_changed/running",
        "system/init",
        "assistant",
        "system/background_tasks_changed",
        "system/task_started",
        "user",
        "assistant",
        "result/success",
        "system/session_state_changed/idle",
        "system/task_updated",
        "system/task_notification",
        "system/background_tasks_changed",
        "system/session_state_changed/running",
        "system/init",
        "assistant",
        "assistant",
        "system/session_state_changed/requires_action",
        "control_request/can_use_tool",
        "system/session_state_changed/running",
        "user",
        "assistant",
        "result/success",
        "system/session_state_changed/idle"
      ])
      expect(field(lines[17], "request_id")).toBe("perm-follow")
      expect(decodedTypes(fake).every((tag) => tag === "Message")).toBe(true)
    }))

  it.scoped("runs from the TypeScript sources under tsx, reading the script from a file", () =>
    Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "fake-cli-"))),
        (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
      )
      const file = path.join(dir, "script.json")
      const record = path.join(dir, "record.ndjson")
      fs.writeFileSync(file, FakeCli.encodeScript([FakeCli.waitFor("user", { record }), FakeCli.exit(7)]))
      const { args } = FakeCli.command(file, { runner: "tsx" })
      expect(args).toContain(FakeCli.binPath)
      expect(args).toContain("--input-format")
      const fake = yield* spawnFake(file, "tsx")
      yield* fake.send(userMessage("recorded"))
      expect(yield* fake.exit).toEqual({ code: 7, signal: null })
      expect(JSON.parse(fs.readFileSync(record, "utf8"))).toEqual(userMessage("recorded"))
    }))

  it.scoped("rejects an invalid script with exit code 2", () =>
    Effect.gen(function*() {
      const fake = yield* spawnFake("[{\"_tag\":\"Explode\"}]")
      expect(yield* fake.exit).toEqual({ code: 2, signal: null })
      expect(fake.err()).toContain("invalid script")
    }))
})
