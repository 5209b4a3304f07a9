/**
 * `skein acp` end to end: the real Claude Code CLI against FakeModel
 * (`--fake-model`: a prompt line `$ <command>` makes the model call Bash,
 * `[slow]` streams a long answer), driven by the ACP SDK's client over the
 * agent's stdio.
 */
import type * as Acp from "@agentclientprotocol/sdk/unstable"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { type Agent, closeStdin, selected, start, textOf } from "./acpAgent.js"
import { commandsIn, folder, processesIn } from "./skein.js"

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

      // Plan mode: reported, and the CLI plans instead of running the command.
      yield* Effect.promise(() => agent.agent.request("session/set_mode", { sessionId, modeId: "plan" }))
      yield* Effect.promise(() => agent.waitFor((n) => isUpdate(sessionId, "current_mode_update")(n) && n.update.sessionUpdate === "current_mode_update" && n.update.currentModeId === "plan"))
      answers.push("allow_once")
      mark = agent.updates.length
      expect((yield* prompt(agent, sessionId, "$ echo planned > planned.txt")).stopReason).toBe("end_turn")
      expect(Fs.existsSync(Path.join(cwd, "planned.txt"))).toBe(false)
      // The CLI refused the command itself: nobody was asked, and the call failed.
      expect(answers).toEqual(["allow_once"])
      const planned = since(agent, sessionId, mark).filter((n) => n.update.sessionUpdate === "tool_call_update")
      expect(planned.at(-1)?.update.sessionUpdate === "tool_call_update" && planned.at(-1)?.update.status).toBe("failed")

      // Nothing but JSON-RPC on stdout; stdin closing ends every session and the process.
      expect(agent.stray).toEqual([])
      const exit = yield* closeStdin(agent)
      expect(exit.code).toBe(0)
      expect(commandsIn(cwd)).toEqual([])
      expect(processesIn(cwd)).toEqual([])
    }), 300_000)
})
