/**
 * `skein acp` as a child process, driven by the ACP SDK's own client over
 * its stdio: the flows acpx cannot express (cancel mid-stream, a mode
 * change, a load in a second process, a withdrawn ask).
 */
import * as Acp from "@agentclientprotocol/sdk/unstable"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import { Readable, Writable } from "node:stream"
import { bin } from "./skein.js"

export type PermissionAnswer = (
  request: Acp.RequestPermissionRequest,
  signal: AbortSignal
) => Promise<Acp.RequestPermissionResponse>

export interface Agent {
  readonly child: ChildProcess.ChildProcess
  readonly agent: Acp.ClientContext
  /** Every `session/update`, in arrival order. */
  readonly updates: Array<Acp.SessionNotification>
  /** Every line the agent printed on stdout that was not JSON-RPC. */
  readonly stray: Array<string>
  readonly stderr: () => string
  /** Resolves at the first update that `match` accepts (from now on, or already received). */
  readonly waitFor: (match: (n: Acp.SessionNotification) => boolean) => Promise<Acp.SessionNotification>
  /** Resolves with the exit code and signal. */
  readonly exited: Promise<{ readonly code: number | null; readonly signal: string | null }>
}

const isJsonRpc = (line: string): boolean => {
  try {
    const parsed: unknown = JSON.parse(line)
    return typeof parsed === "object" && parsed !== null && "jsonrpc" in parsed
  } catch {
    return false
  }
}

export const selected = (optionId: string): Acp.RequestPermissionResponse => ({ outcome: { outcome: "selected", optionId } })

/** Starts `skein acp …args` in `cwd` and connects a client to it; killed with the scope if still running. */
export const start = (args: ReadonlyArray<string>, options: { readonly cwd: string; readonly permission?: PermissionAnswer | undefined }) =>
  Effect.acquireRelease(
    Effect.promise(async (): Promise<Agent> => {
      const child = ChildProcess.spawn(process.execPath, [bin, "acp", ...args], {
        cwd: options.cwd,
        env: { ...process.env, NO_COLOR: "1" },
        stdio: ["pipe", "pipe", "pipe"]
      })
      let stderr = ""
      child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text))
      const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
        child.once("exit", (code, signal) => resolve({ code, signal }))
      )
      const stray: Array<string> = []
      // Every whole stdout line is checked to be JSON-RPC as the SDK reads it.
      let pending = ""
      const decoder = new TextDecoder()
      const checked = Readable.toWeb(child.stdout).pipeThrough(new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          const lines = (pending + decoder.decode(chunk, { stream: true })).split("\n")
          pending = lines.pop() ?? ""
          for (const line of lines) if (line.trim().length > 0 && !isJsonRpc(line)) stray.push(line)
          controller.enqueue(chunk)
        }
      }))
      const stream = Acp.ndJsonStream(Writable.toWeb(child.stdin), checked)
      const updates: Array<Acp.SessionNotification> = []
      const waiters: Array<{ match: (n: Acp.SessionNotification) => boolean; resolve: (n: Acp.SessionNotification) => void }> = []
      const app = Acp.client({ name: "skein-test" })
        .onNotification("session/update", ({ params }) => {
          updates.push(params)
          for (const waiter of [...waiters]) {
            if (waiter.match(params)) {
              waiters.splice(waiters.indexOf(waiter), 1)
              waiter.resolve(params)
            }
          }
        })
        .onRequest("session/request_permission", ({ params, signal }) =>
          options.permission === undefined ? Promise.resolve(selected("reject")) : options.permission(params, signal))
      const connection = app.connect(stream)
      await connection.agent.request("initialize", { protocolVersion: Acp.PROTOCOL_VERSION, clientCapabilities: {} })
      const waitFor = (match: (n: Acp.SessionNotification) => boolean) => {
        const found = updates.find(match)
        return found !== undefined ? Promise.resolve(found) : new Promise<Acp.SessionNotification>((resolve) => waiters.push({ match, resolve }))
      }
      return { child, agent: connection.agent, updates, stray, stderr: () => stderr, waitFor, exited }
    }),
    (agent) =>
      Effect.sync(() => {
        if (agent.child.exitCode === null && agent.child.signalCode === null) agent.child.kill("SIGKILL")
      })
  )

/** Closes the agent's stdin, as an editor that quits does, and waits for it to exit. */
export const closeStdin = (agent: Agent) =>
  Effect.promise(() => {
    agent.child.stdin?.end()
    return agent.exited
  })

export const textOf = (updates: ReadonlyArray<Acp.SessionNotification>, kind: Acp.SessionUpdate["sessionUpdate"]) =>
  updates.flatMap((n) =>
    n.update.sessionUpdate === kind && "content" in n.update && !Array.isArray(n.update.content) && n.update.content?.type === "text"
      ? [n.update.content.text]
      : []
  ).join("")
