/**
 * The registry's edges with the real CLI and FakeModel: a prompt interrupted
 * while its session starts, a prompt to an unknown id, an event log that
 * refuses a write, and a CLI that goes silent mid-turn.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { ProcessHost } from "@skein/kernel"
import { EventLog } from "@skein/store"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Chunk, Effect, Fiber, Layer, Option, Ref, Schedule, Stream } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as PermissionBroker from "../src/PermissionBroker.js"
import * as ServerEvents from "../src/ServerEvents.js"
import * as SessionRegistry from "../src/SessionRegistry.js"
import * as Harness from "./harness.js"

/** Filler the CLI keeps in its own transcripts: 4,000 snapshot lines of 10 KB, so that loading the transcript takes a while. */
const inflate = (path: string) => {
  const line = JSON.stringify({
    type: "file-history-snapshot",
    messageId: crypto.randomUUID(),
    snapshot: { messageId: crypto.randomUUID(), trackedFileBackups: {}, timestamp: new Date().toISOString(), note: "x".repeat(10_000) },
    isSnapshotUpdate: false
  })
  Fs.appendFileSync(path, `${line}\n`.repeat(4000))
}

const transcriptOf = (dir: string, cliSessionId: string): string => {
  const projects = `${dir}/projects`
  for (const project of Fs.readdirSync(projects)) {
    const file = `${projects}/${project}/${cliSessionId}.jsonl`
    if (Fs.existsSync(file)) return file
  }
  throw new Error(`no transcript for ${cliSessionId}`)
}

describe("the session registry's edges with the real CLI", () => {
  it.scopedLive("a prompt interrupted while its session starts leaves the session usable; an unknown id leaves nothing", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.text("First."), FakeModel.text("After the interruption.")] })
      const server = yield* Harness.start(model)
      const created = yield* server.registry.create({ directory: server.dirs.cwd })
      yield* server.registry.prompt(created.id, "one")
      yield* server.registry.stop(created.id)
      inflate(transcriptOf(server.dirs.configDir, created.cliSessionId))

      // The client goes away while the 40 MB transcript loads for the resume.
      const interrupted = yield* Effect.fork(server.registry.prompt(created.id, "lost"))
      yield* Effect.sleep("150 millis")
      yield* Fiber.interrupt(interrupted)

      // Every later call on the session is answered (before: each waited forever on a start that never ended).
      expect(yield* server.registry.abort(created.id).pipe(Effect.timeout("60 seconds"))).toBe(true)
      const reply = yield* server.registry.prompt(created.id, "two").pipe(Effect.timeout("120 seconds"))
      expect(reply.parts.flatMap((p) => (p.type === "text" ? [p.text] : []))).toContain("After the interruption.")

      // Twice: the first left a slot behind, on which the second waited forever.
      for (const _ of [1, 2]) {
        const unknown = yield* Effect.flip(server.registry.prompt("ses_unknown", "hello")).pipe(Effect.timeout("30 seconds"))
        expect(unknown._tag).toBe("SessionNotFound")
      }
      expect(yield* server.registry.running).toEqual([created.id])
      yield* server.registry.stop(created.id)
      expect(yield* server.registry.running).toEqual([])
    }), 240_000)

  it.scopedLive("a failed event-log write in the live pump is a session.error, and the session stops; the next prompt resumes it", () =>
    Effect.gen(function*() {
      // Each reply answers its own prompt: whether the CLI asked for the second
      // one before it was stopped is a race the test must not depend on.
      const answers = (prompt: string): FakeModel.RequestMatch => (request) =>
        FakeModel.isConversation(request) && FakeModel.promptOf(request).split("\n").some((line) => line.trim() === prompt)
      const model = yield* FakeModel.make({
        replies: [
          FakeModel.matching(FakeModel.text("Before the fault."), answers("one")),
          FakeModel.matching(FakeModel.text("Lost to the fault."), answers("two")),
          FakeModel.matching(FakeModel.text("After it."), answers("three"))
        ]
      })
      const dirs = yield* ClaudeCli.offlineDirs("skein-serve-")
      // The real log, whose next write of a part fails once, as a full disk would.
      const failNext = yield* Ref.make(false)
      const failAll = yield* Ref.make(false)
      const enospc = new EventLog.EventLogError({ path: "events", message: "ENOSPC: no space left on device" })
      const faulty = Layer.effect(ServerEvents.ServerEvents, Effect.map(ServerEvents.ServerEvents, (real) => ({
        ...real,
        publish: (directory, events) =>
          Effect.if(Ref.get(failAll), { onTrue: () => Effect.fail(enospc), onFalse: () => Effect.void }).pipe(Effect.zipRight(Effect.flatMap(
            Ref.getAndUpdate(failNext, (armed) => armed && !events.some((e) => e.type === "message.part.updated")),
            (armed) =>
              armed && events.some((e) => e.type === "message.part.updated")
                ? Effect.fail(enospc)
                : real.publish(directory, events)
          )))
      }))).pipe(Layer.provide(ServerEvents.layer({ dir: Path.join(dirs.root, "events") })))
      const context = yield* Layer.build(
        Layer.effect(SessionRegistry.SessionRegistry, SessionRegistry.make({
          configDir: dirs.configDir,
          session: {
            env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: dirs.configDir, tmpDir: dirs.tmpDir }),
            bare: true,
            stopTimeouts: { stdinGrace: "500 millis", termGrace: "500 millis" }
          }
        })).pipe(
          Layer.provideMerge(Layer.mergeAll(faulty, PermissionBroker.layer())),
          Layer.provideMerge(Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer))
        )
      )
      const registry = yield* Effect.provide(SessionRegistry.SessionRegistry, context)
      const events = yield* Effect.provide(ServerEvents.ServerEvents, context)
      const created = yield* registry.create({ directory: dirs.cwd })
      yield* registry.prompt(created.id, "one")
      yield* Ref.set(failNext, true)
      const failed = yield* Effect.flip(registry.prompt(created.id, "two")).pipe(Effect.timeout("60 seconds"))
      expect(failed._tag).toBe("SessionFailed")
      // Stopped, not left running unseen.
      yield* registry.running.pipe(Effect.repeat({ until: (ids) => ids.length === 0, schedule: Schedule.spaced("100 millis") }), Effect.timeout("30 seconds"))
      const logged = yield* events.follow(1).pipe(
        Stream.takeUntil((r) => r.message.payload.type === "session.error"),
        Stream.runCollect,
        Effect.timeout("10 seconds")
      )
      const error = Chunk.toReadonlyArray(logged).at(-1)!.message.payload
      expect(error.type).toBe("session.error")
      expect(JSON.stringify(error.properties)).toContain("ENOSPC")
      const after = yield* registry.prompt(created.id, "three").pipe(Effect.timeout("60 seconds"))
      expect(after.parts.flatMap((p) => (p.type === "text" ? [p.text] : []))).toContain("After it.")
      // publishInfo: a refused write is the operation's typed failure (a 500 with its reason), not a defect.
      yield* registry.stop(created.id)
      yield* Ref.set(failAll, true)
      const refused = yield* Effect.flip(registry.update(created.id, { title: "renamed" }))
      expect(refused._tag).toBe("SessionFailed")
      expect(refused.message).toContain("the event log refused session.updated")
    }), 240_000)

  it.scopedLive("a served session has a silence timeout: a CLI that says nothing past it is stopped with a session.error", () =>
    Effect.gen(function*() {
      // The second answer never comes within the test: the CLI waits on the model, silent.
      const model = yield* FakeModel.make({ replies: [FakeModel.text("Fine."), FakeModel.withDelay(FakeModel.text("Too late."), "10 minutes")] })
      const server = yield* Harness.start(model, { silenceTimeout: "3 seconds" })
      const created = yield* server.registry.create({ directory: server.dirs.cwd })
      yield* server.registry.prompt(created.id, "first")
      const failed = yield* Effect.flip(server.registry.prompt(created.id, "hello")).pipe(Effect.timeout("60 seconds"))
      expect(failed._tag).toBe("SessionFailed")
      expect(failed.message).toContain("SessionSilent")
      const logged = yield* server.events.follow(1).pipe(
        Stream.takeUntil((r) => r.message.payload.type === "session.error"),
        Stream.runCollect,
        Effect.timeout("10 seconds")
      )
      expect(JSON.stringify(Chunk.toReadonlyArray(logged).at(-1)!.message.payload.properties)).toContain("said nothing")
      yield* server.registry.running.pipe(Effect.repeat({ until: (ids) => ids.length === 0, schedule: Schedule.spaced("100 millis") }), Effect.timeout("30 seconds"))
    }), 120_000)

  it.scopedLive("prompt fields: model switches the CLI's model, agent is the one there is; system and noReply are refused with a 400 naming them", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.text("On haiku."), FakeModel.text("Back on the default.")] })
      const server = yield* Harness.start(model)
      const headers = { ...server.headers, "content-type": "application/json" }
      const post = (path: string, body: unknown) =>
        Effect.promise(async () => {
          const response = await fetch(`${server.url}${path}`, { method: "POST", headers, body: JSON.stringify(body) })
          const text = await response.text()
          return { status: response.status, body: text === "" ? undefined : JSON.parse(text) }
        })
      const created = (yield* post("/session", {})).body
      const parts = [{ type: "text", text: "hello" }]
      const refused = (body: Record<string, unknown>) => Effect.map(post(`/session/${created.id}/message`, { ...body, parts }), (r) => r)
      for (const [field, body] of [
        ["system", { system: "You are a pirate." }],
        ["noReply", { noReply: true }],
        ["agent", { agent: "plan" }],
        ["model", { model: { providerID: "openai", modelID: "gpt-5" } }],
        ["model", { model: { providerID: "anthropic", modelID: "claude-imaginary" } }]
      ] as const) {
        const answer = yield* refused(body)
        expect(answer.status).toBe(400)
        expect(answer.body.name).toBe("BadRequest")
        expect(answer.body.data.message.startsWith(`${field}:`)).toBe(true)
      }
      // Every model /provider lists is one a prompt can switch to.
      const listed = yield* Effect.promise(async () => (await (await fetch(`${server.url}/provider`, { headers })).json()) as { all: ReadonlyArray<{ models: Record<string, unknown> }> })
      expect(Object.keys(listed.all[0]!.models)).toEqual(["default", "sonnet", "opus", "haiku"])
      const onHaiku = yield* post(`/session/${created.id}/message`, { agent: "build", model: { providerID: "anthropic", modelID: "haiku" }, parts })
      expect(onHaiku.status).toBe(200)
      const first = yield* model.awaitRequest(0, FakeModel.isConversation)
      expect(String(Option.getOrThrow(first.messagesRequest).model)).toContain("haiku")
      const back = yield* post(`/session/${created.id}/message`, { model: { providerID: "anthropic", modelID: "default" }, parts })
      expect(back.status).toBe(200)
      const second = yield* model.awaitRequest(1, FakeModel.isConversation)
      expect(String(Option.getOrThrow(second.messagesRequest).model)).not.toContain("haiku")
    }), 120_000)
})
