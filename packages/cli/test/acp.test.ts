/**
 * `skein acp` end to end: the real Claude Code CLI against FakeModel
 * (`--fake-model`: a prompt line `$ <command>` makes the model call Bash,
 * `[slow]` streams a long answer), driven by the ACP SDK's client over the
 * agent's stdio.
 */
import type * as Acp from "@agentclientprotocol/sdk/unstable"
import { describe, expect, it } from "@effect/vitest"
import { NodeContext } from "@effect/platform-node"
import { ProcessHost } from "@skein/kernel"
import { Session } from "@skein/session"
import { ClaudeCli, CliRelease, FakeModel } from "@skein/testkit"
import { Effect, Layer } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { type Agent, closeStdin, selected, start, textOf } from "./acpAgent.js"
import { bin, commandsIn, folder, processesIn } from "./skein.js"

const prompt = (agent: Agent, sessionId: string, text: string) =>
  Effect.promise(() => agent.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] }))

const newSession = (agent: Agent, cwd: string) =>
  Effect.promise(() => agent.agent.request("session/new", { cwd, mcpServers: [] }))

/** Updates of one session from index `from` on. */
const since = (agent: Agent, sessionId: string, from: number) => agent.updates.slice(from).filter((n) => n.sessionId === sessionId)

const isUpdate = (sessionId: string, kind: Acp.SessionUpdate["sessionUpdate"]) => (n: Acp.SessionNotification) =>
  n.sessionId === sessionId && n.update.sessionUpdate === kind

describe("skein acp, through the ACP SDK's client", () => {
  it.scopedLive("streams a reply, asks before Bash (runs after allow once, not after reject), honours plan mode, cancels mid-stream, and leaves no process when stdin closes", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const root = Path.join(cwd, ".root")
      Fs.mkdirSync(root)  // --root must name an existing folder, as for every command
      const answers: Array<string> = []
      const asked: Array<Acp.RequestPermissionRequest> = []
      let withdrawn = 0
      const agent = yield* start(["--fake-model", "--root", root], {
        cwd,
        permission: (request, signal) => {
          asked.push(request)
          const answer = answers.shift()
          if (answer !== undefined) return Promise.resolve(selected(answer))
          // No answer: the ask waits until the agent withdraws it.
          return new Promise((resolve) =>
            signal.addEventListener("abort", () => {
              withdrawn++
              resolve({ outcome: { outcome: "cancelled" } })
            }))
        }
      })
      const { sessionId, modes } = yield* newSession(agent, cwd)
      expect(modes?.currentModeId).toBe("default")

      // A prompt streams its reply.
      let mark = agent.updates.length
      const hello = yield* prompt(agent, sessionId, "hello")
      expect(hello.stopReason).toBe("end_turn")
      const chunks = since(agent, sessionId, mark).filter((n) => n.update.sessionUpdate === "agent_message_chunk")
      expect(chunks.length).toBeGreaterThan(1)
      expect(textOf(chunks, "agent_message_chunk")).toMatch(/fake model/)
      expect(since(agent, sessionId, mark).some((n) => n.update.sessionUpdate === "usage_update")).toBe(true)
      expect(agent.updates.some(isUpdate(sessionId, "available_commands_update"))).toBe(true)

      // Reject: the command does not run.
      answers.push("reject")
      mark = agent.updates.length
      expect((yield* prompt(agent, sessionId, "$ echo no > rejected.txt")).stopReason).toBe("end_turn")
      expect(Fs.existsSync(Path.join(cwd, "rejected.txt"))).toBe(false)
      expect(asked.at(-1)?.toolCall.title).toBe("echo no > rejected.txt")
      const rejectedCall = since(agent, sessionId, mark).find(isUpdate(sessionId, "tool_call"))
      expect(rejectedCall?.update.sessionUpdate === "tool_call" && rejectedCall.update.kind).toBe("execute")

      // Allow once: it runs, and its output is the call's content.
      answers.push("allow_once")
      mark = agent.updates.length
      expect((yield* prompt(agent, sessionId, "$ echo yes > allowed.txt")).stopReason).toBe("end_turn")
      expect(Fs.readFileSync(Path.join(cwd, "allowed.txt"), "utf8")).toBe("yes\n")
      const completed = since(agent, sessionId, mark).find((n) => n.update.sessionUpdate === "tool_call_update" && n.update.status === "completed")
      expect(completed).toBeDefined()

      // Cancel mid-stream: the prompt answers `cancelled`, and the next one works.
      mark = agent.updates.length
      const slow = agent.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "[slow] tell me a story" }] })
      yield* Effect.promise(() => agent.waitFor((n) => n.sessionId === sessionId && agent.updates.indexOf(n) >= mark && n.update.sessionUpdate === "agent_message_chunk"))
      yield* Effect.promise(() => agent.agent.notify("session/cancel", { sessionId }))
      expect((yield* Effect.promise(() => slow)).stopReason).toBe("cancelled")
      // Far less than the 3,600 characters of the whole answer came.
      expect(textOf(since(agent, sessionId, mark), "agent_message_chunk").length).toBeLessThan(3000)
      expect((yield* prompt(agent, sessionId, "hello again")).stopReason).toBe("end_turn")

      // A cancelled turn withdraws its ask.
      const waiting = agent.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "$ echo never > never.txt" }] })
      const asks = asked.length
      yield* Effect.promise(() => agent.waitFor((n) => n.sessionId === sessionId && n.update.sessionUpdate === "tool_call_update" && n.update.title === "echo never > never.txt"))
      yield* Effect.promise(async () => {
        while (asked.length === asks) await new Promise((r) => setTimeout(r, 20))
      })
      yield* Effect.promise(() => agent.agent.notify("session/cancel", { sessionId }))
      expect((yield* Effect.promise(() => waiting)).stopReason).toBe("cancelled")
      yield* Effect.promise(async () => {
        while (withdrawn === 0) await new Promise((r) => setTimeout(r, 20))
      })
      expect(Fs.existsSync(Path.join(cwd, "never.txt"))).toBe(false)

      // Plan mode, in a second session: reported, and the CLI plans instead of running the command.
      const planning = (yield* newSession(agent, cwd)).sessionId
      yield* Effect.promise(() => agent.agent.request("session/set_mode", { sessionId: planning, modeId: "plan" }))
      yield* Effect.promise(() => agent.waitFor((n) => n.sessionId === planning && n.update.sessionUpdate === "current_mode_update" && n.update.currentModeId === "plan"))
      answers.push("allow_once")
      mark = agent.updates.length
      expect((yield* prompt(agent, planning, "$ echo planned > planned.txt")).stopReason).toBe("end_turn")
      expect(Fs.existsSync(Path.join(cwd, "planned.txt"))).toBe(false)
      // The CLI refused the command itself: nobody was asked, and the call failed.
      expect(answers).toEqual(["allow_once"])
      const planned = since(agent, planning, mark).flatMap((n) => n.update.sessionUpdate === "tool_call_update" ? [n.update.status] : [])
      expect(planned.at(-1)).toBe("failed")

      // Nothing but JSON-RPC on stdout; stdin closing ends every session and the process.
      expect(agent.stray).toEqual([])
      const exit = yield* closeStdin(agent)
      expect(exit.code).toBe(0)
      expect(commandsIn(cwd)).toEqual([])
      expect(processesIn(cwd)).toEqual([])
    }), 300_000)

  it.scopedLive("allow always holds for the session; session/load in a new skein acp replays the conversation before it answers; fork, list, close and resume", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const root = Path.join(cwd, ".root")
      Fs.mkdirSync(root)  // --root must name an existing folder, as for every command
      let asks = 0
      const first = yield* start(["--fake-model", "--root", root], {
        cwd,
        permission: () => {
          asks++
          return Promise.resolve(selected("allow_always"))
        }
      })
      const { sessionId } = yield* newSession(first, cwd)
      yield* prompt(first, sessionId, "hello")
      yield* prompt(first, sessionId, "$ echo loaded > loaded.txt")
      // Allowed always: the next Bash call of the session runs unasked.
      yield* prompt(first, sessionId, "$ echo again > again.txt")
      expect(asks).toBe(1)
      expect(Fs.existsSync(Path.join(cwd, "again.txt"))).toBe(true)
      const shown = textOf(first.updates, "agent_message_chunk")
      expect((yield* closeStdin(first)).code).toBe(0)

      const second = yield* start(["--fake-model", "--root", root], { cwd })
      const listed = yield* Effect.promise(() => second.agent.request("session/list", { cwd }))
      expect(listed.sessions.map((s) => s.sessionId)).toContain(sessionId)
      const loaded = yield* Effect.promise(() => second.agent.request("session/load", { sessionId, cwd, mcpServers: [] }))
      // Every update of the replay came before the answer.
      const replayed = [...second.updates]
      expect(loaded.modes?.currentModeId).toBe("default")
      expect(textOf(replayed, "user_message_chunk")).toContain("hello")
      expect(textOf(replayed, "user_message_chunk")).toContain("$ echo loaded > loaded.txt")
      expect(textOf(replayed, "agent_message_chunk")).toBe(shown)
      const call = replayed.find((n) => n.update.sessionUpdate === "tool_call")
      expect(call?.update.sessionUpdate === "tool_call" && [call.update.title, call.update.status]).toEqual(["echo loaded > loaded.txt", "completed"])
      expect((yield* prompt(second, sessionId, "hello again")).stopReason).toBe("end_turn")
      expect(textOf(second.updates.slice(replayed.length), "agent_message_chunk")).toMatch(/fake model/)

      // A fork is a new session over the same history; closing the original leaves the fork running.
      const forked = yield* Effect.promise(() => second.agent.request("session/fork", { sessionId, cwd }))
      expect(forked.sessionId).not.toBe(sessionId)
      yield* Effect.promise(() => second.agent.request("session/close", { sessionId }))
      expect((yield* prompt(second, forked.sessionId, "hello from the fork")).stopReason).toBe("end_turn")
      const afterFork = yield* Effect.promise(() => second.agent.request("session/list", { cwd }))
      expect(afterFork.sessions.map((s) => s.sessionId)).toEqual(expect.arrayContaining([sessionId, forked.sessionId]))
      // The closed one resumes, without a replay.
      const before = second.updates.length
      yield* Effect.promise(() => second.agent.request("session/resume", { sessionId, cwd }))
      expect(second.updates.slice(before).filter((n) => n.sessionId === sessionId)).toEqual([])
      expect((yield* prompt(second, sessionId, "hello after resume")).stopReason).toBe("end_turn")
      expect((yield* closeStdin(second)).code).toBe(0)
      expect(processesIn(cwd)).toEqual([])
    }), 300_000)

  it.scopedLive("the CLI's death fails the prompt with a JSON-RPC error carrying its exit and stderr", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const root = Path.join(cwd, ".root")
      Fs.mkdirSync(root)  // --root must name an existing folder, as for every command
      const agent = yield* start(["--fake-model", "--root", root, "--pool", "0"], { cwd })
      const { sessionId } = yield* newSession(agent, cwd)
      const slow = agent.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "[slow] a long one" }] })
      yield* Effect.promise(() => agent.waitFor(isUpdate(sessionId, "agent_message_chunk")))
      const cli = processesIn(cwd).filter((pid) => pid !== agent.child.pid)
      expect(cli.length).toBeGreaterThan(0)
      for (const pid of cli) process.kill(pid, "SIGKILL")
      const error = yield* Effect.promise(() => slow.then(() => undefined, (e: unknown) => e))
      expect(error).toMatchObject({ code: -32603, data: { kind: "CliDied", signal: "SIGKILL", exitCode: null, stderrTail: expect.any(String) } })
      expect(String(error instanceof Error ? error.message : error)).toMatch(/exited with signal SIGKILL/)
      expect((yield* closeStdin(agent)).code).toBe(0)
      expect(processesIn(cwd)).toEqual([])
    }), 300_000)
})

describe("skein acp when the editor quits mid-turn", () => {
  it.scopedLive("stdin closing while a prompt streams ends the session and the process, leaving no process", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const root = Path.join(cwd, ".root")
      Fs.mkdirSync(root)  // --root must name an existing folder, as for every command
      const agent = yield* start(["--fake-model", "--root", root], { cwd })
      const { sessionId } = yield* newSession(agent, cwd)
      agent.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "[slow] a long one" }] }).catch(() => undefined)
      yield* Effect.promise(() => agent.waitFor(isUpdate(sessionId, "agent_message_chunk")))
      expect(processesIn(cwd).length).toBeGreaterThan(1)
      const exit = yield* closeStdin(agent)
      expect(exit.code).toBe(0)
      expect(processesIn(cwd)).toEqual([])
    }), 300_000)
})

describe("skein acp, through acpx", () => {
  const acpxBin = Path.resolve(import.meta.dirname, "../../../node_modules/acpx/dist/cli.js")

  /** `acpx --format json … --agent "skein acp …" exec <prompt>`: its JSON-RPC transcript, one message a line. */
  const acpx = (cwd: string, root: string, flags: ReadonlyArray<string>, text: string) =>
    Effect.promise(() =>
      new Promise<{ readonly code: number | null; readonly messages: ReadonlyArray<Record<string, unknown>> }>((resolve) => {
        const agentCommand = `${process.execPath} ${bin} acp --fake-model --root ${root}`
        const child = ChildProcess.spawn(process.execPath, [acpxBin, "--format", "json", ...flags, "--agent", agentCommand, "exec", text], {
          cwd,
          env: { ...process.env, HOME: root, NO_COLOR: "1" },
          stdio: ["ignore", "pipe", "pipe"]
        })
        let out = ""
        child.stdout.setEncoding("utf8").on("data", (t: string) => (out += t))
        child.once("close", (code) =>
          resolve({
            code,
            messages: out.split("\n").filter((l) => l.startsWith("{")).map((l): Record<string, unknown> => JSON.parse(l))
          }))
      })
    )

  const field = (value: unknown, key: string): unknown =>
    typeof value === "object" && value !== null && !Array.isArray(value) ? Reflect.get(value, key) : undefined

  /** The updates acpx received, as `[kind, text of the content, status]`. */
  const updatesOf = (messages: ReadonlyArray<Record<string, unknown>>) =>
    messages.flatMap((m) => {
      if (m["method"] !== "session/update") return []
      const update = field(m["params"], "update")
      return [{
        kind: String(field(update, "sessionUpdate")),
        text: String(field(field(update, "content"), "text") ?? ""),
        status: field(update, "status")
      }]
    })

  it.scopedLive("a prompt streams its reply; a Bash call runs with --approve-all and not with --deny-all; no process is left", () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const root = Path.join(cwd, ".root")
      Fs.mkdirSync(root)

      const hello = yield* acpx(cwd, root, ["--approve-all"], "hello")
      expect(hello.code).toBe(0)
      const chunks = updatesOf(hello.messages).filter((u) => u.kind === "agent_message_chunk")
      expect(chunks.length).toBeGreaterThan(1)
      expect(chunks.map((u) => u.text).join("")).toMatch(/fake model/)
      expect(hello.messages.some((m) => JSON.stringify(m["result"] ?? null).includes("\"stopReason\":\"end_turn\""))).toBe(true)

      const allowed = yield* acpx(cwd, root, ["--approve-all"], "$ echo yes > approved.txt")
      expect(allowed.code).toBe(0)
      expect(allowed.messages.some((m) => m["method"] === "session/request_permission")).toBe(true)
      expect(Fs.readFileSync(Path.join(cwd, "approved.txt"), "utf8")).toBe("yes\n")

      const denied = yield* acpx(cwd, root, ["--deny-all"], "$ echo no > denied.txt")
      expect(denied.messages.some((m) => m["method"] === "session/request_permission")).toBe(true)
      expect(Fs.existsSync(Path.join(cwd, "denied.txt"))).toBe(false)
      expect(updatesOf(denied.messages).some((u) => u.kind === "tool_call_update" && u.status === "failed")).toBe(true)

      expect(processesIn(cwd)).toEqual([])
    }), 300_000)
})

describe("skein acp and an older CLI's transcript", () => {
  it.scopedLive(`session/load replays a conversation the ${CliRelease.defaultVersion} CLI wrote, and goes on with it`, () =>
    Effect.gen(function*() {
      const cwd = yield* folder
      const root = Path.join(cwd, ".root")
      const tmpDir = Path.join(cwd, ".tmp")
      Fs.mkdirSync(root)
      Fs.mkdirSync(tmpDir)
      // The old CLI writes the transcript, offline against a FakeModel of the test's own.
      const release = yield* CliRelease.install()
      const sessionId = yield* Effect.scoped(Effect.gen(function*() {
        const model = yield* FakeModel.make({ replies: [FakeModel.text("Hello from the old CLI.")] })
        const session = yield* Session.start({
          cwd,
          configDir: root,
          env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: root, tmpDir }),
          // The 2.0 line has no --bare.
          executable: release.command,
          executableArgs: release.args
        })
        const turn = yield* session.send("hello, old CLI")
        yield* turn.result
        return yield* session.sessionId
      })).pipe(Effect.provide(Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer)))

      const agent = yield* start(["--fake-model", "--root", root], { cwd })
      yield* Effect.promise(() => agent.agent.request("session/load", { sessionId, cwd, mcpServers: [] }))
      const replayed = [...agent.updates]
      expect(textOf(replayed, "user_message_chunk")).toBe("hello, old CLI")
      expect(textOf(replayed, "agent_message_chunk")).toBe("Hello from the old CLI.")
      expect((yield* prompt(agent, sessionId, "hello again")).stopReason).toBe("end_turn")
      expect(textOf(agent.updates.slice(replayed.length), "agent_message_chunk")).toMatch(/fake model/)
      expect((yield* closeStdin(agent)).code).toBe(0)
      expect(processesIn(cwd)).toEqual([])
    }), 300_000)
})
