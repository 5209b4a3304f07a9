/**
 * `AcpAgent.serve` in process, over a stream pair to the ACP SDK's client,
 * with the real CLI against a scripted FakeModel: what `--fake-model` cannot
 * script (a prompt too long for the model, `/compact`).
 */
import * as Acp from "@agentclientprotocol/sdk/unstable"
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { AcpAgent } from "@skein/acp"
import { ProcessHost } from "@skein/kernel"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Layer } from "effect"

const layer = Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer)

/** Two one-way pipes: the agent's stream and the client's. */
const pipes = () => {
  const toAgent = new TransformStream<Acp.AnyMessage, Acp.AnyMessage>()
  const toClient = new TransformStream<Acp.AnyMessage, Acp.AnyMessage>()
  return {
    agent: { writable: toClient.writable, readable: toAgent.readable },
    client: { writable: toAgent.writable, readable: toClient.readable }
  }
}

const setup = (model: FakeModel.FakeModel["Type"]) =>
  Effect.gen(function*() {
    const dirs = yield* ClaudeCli.offlineDirs("skein-acp-")
    const { agent, client } = pipes()
    yield* AcpAgent.serve(agent, {
      configDir: dirs.configDir,
      session: { env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: dirs.configDir, tmpDir: dirs.tmpDir }), configDir: dirs.configDir, bare: true }
    }).pipe(Effect.forkScoped)
    const updates: Array<Acp.SessionNotification> = []
    const connection = Acp.client({ name: "test" })
      .onNotification("session/update", ({ params }) => {
        updates.push(params)
      })
      .onRequest("session/request_permission", () => ({ outcome: { outcome: "selected", optionId: "allow_once" } }))
      .connect(client)
    yield* Effect.addFinalizer(() => Effect.sync(() => connection.close()))
    yield* Effect.promise(() => connection.agent.request("initialize", { protocolVersion: Acp.PROTOCOL_VERSION, clientCapabilities: {} }))
    const { sessionId } = yield* Effect.promise(() => connection.agent.request("session/new", { cwd: dirs.cwd, mcpServers: [] }))
    const prompt = (text: string) =>
      Effect.promise(() => connection.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] }))
    const said = (from: number) =>
      updates.slice(from).flatMap((n) => n.update.sessionUpdate === "agent_message_chunk" && n.update.content.type === "text" ? [n.update.content.text] : []).join("")
    return { connection, updates, prompt, said, sessionId }
  })

describe("AcpAgent.serve", () => {
  it.live("a prompt too long for the model is compacted, reported, and goes on; /compact compacts host-side; the session goes on after it", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.text("First answer."),
          FakeModel.error(400, "invalid_request_error", "prompt is too long: 250000 tokens > 200000 maximum"),
          FakeModel.text("Answer after compaction."),
          FakeModel.text("Going on.")
        ]
      })
      const t = yield* setup(model)
      expect((yield* t.prompt("hello")).stopReason).toBe("end_turn")

      let mark = t.updates.length
      expect((yield* t.prompt("and now a long one")).stopReason).toBe("end_turn")
      const said = t.said(mark)
      // The pinned CLI compacts by itself on a prompt too long (the host compacts when a CLI gives up instead): the client is told.
      expect(said).toMatch(/^The conversation was compacted automatically/)
      expect(said).toContain("Answer after compaction.")
      expect((yield* model.requests).filter(FakeModel.isCompaction).length).toBe(1)

      mark = t.updates.length
      expect((yield* t.prompt("/compact")).stopReason).toBe("end_turn")
      expect(t.said(mark)).toMatch(/^Compacted the conversation: about \d+ tokens before, \d+ after\.$/)
      expect((yield* t.prompt("one more")).stopReason).toBe("end_turn")
      expect(t.said(mark)).toContain("Going on.")
    }).pipe(Effect.scoped, Effect.provide(layer)), 240_000)
})
