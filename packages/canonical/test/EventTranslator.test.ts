import { describe, expect, it } from "@effect/vitest"
import { Canonical, CliMessage, Lenient } from "@skein/protocol"
import { EventTranslator, History, Ids, Invariants } from "@skein/canonical"
import { Chunk, Effect, Stream } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { captures, olderCaptures, translate } from "./captures.js"

const goldenDir = path.join(import.meta.dirname, "golden")
const update = process.env.UPDATE_GOLDEN === "1"

const ndjson = (events: ReadonlyArray<Canonical.CanonicalEvent>) => events.map((e) => JSON.stringify(e)).join("\n") + "\n"

const count = (events: ReadonlyArray<Canonical.CanonicalEvent>, type: string) => events.filter((e) => e.type === type).length

describe("EventTranslator over the real-CLI captures", () => {
  for (const capture of captures()) {
    describe(capture.name, () => {
      const events = translate(capture)

      it("matches its golden canonical output", () => {
        const file = path.join(goldenDir, `${capture.name}.ndjson`)
        if (update) fs.writeFileSync(file, ndjson(events))
        expect(fs.existsSync(file), `no golden output yet: run with UPDATE_GOLDEN=1`).toBe(true)
        expect(ndjson(events)).toEqual(fs.readFileSync(file, "utf8"))
      })

      it("keeps the invariants", () => {
        expect(Invariants.check(events)).toBeUndefined()
      })

      it("gives the same events and ids when translated twice", () => {
        expect(translate(capture)).toEqual(events)
      })

      it("traces every unknown message and diagnostic", () => {
        const unknown = capture.events.filter((e) => e._tag !== "Message").length
        const traced = events.filter((e) => e.type === "session.cli_event" && e.properties.kind !== "message").length
        expect(traced).toBeGreaterThanOrEqual(unknown)
      })

      it("sorts messages by id in creation order, and parts within a message", () => {
        const messages = History.collect(events)
        const created: Array<string> = []
        const partOrder = new Map<string, Array<string>>()
        for (const e of events) {
          if (e.type === "message.updated" && !created.includes(e.properties.info.id)) created.push(e.properties.info.id)
          if (e.type === "message.part.updated") {
            const order = partOrder.get(e.properties.part.messageID) ?? []
            if (!order.includes(e.properties.part.id)) order.push(e.properties.part.id)
            partOrder.set(e.properties.part.messageID, order)
          }
        }
        expect(messages.map((m) => m.info.id)).toEqual(created)
        for (const m of messages) expect(m.parts.map((p) => p.id)).toEqual(partOrder.get(m.info.id) ?? [])
      })
    })
  }

  it("covers text and thinking, two tools, a permission, a background task, an interrupt, /compact and a 529 retry", () => {
    const byName = new Map(captures().map((c) => [c.name, translate(c)]))
    const parts = (name: string) =>
      (byName.get(name) ?? []).flatMap((e) => (e.type === "message.part.updated" ? [e.properties.part] : []))
    expect(parts("text-thinking").some((p) => p.type === "reasoning" && p.text.includes("greeting"))).toBe(true)
    expect(count(byName.get("text-thinking") ?? [], "message.part.delta")).toBeGreaterThan(5)
    const tools = History.collect(byName.get("two-tools") ?? []).flatMap((m) => m.parts.filter((p) => p.type === "tool"))
    expect(tools.map((p) => p.type === "tool" ? p.state.status : "")).toEqual(["completed", "error"])
    expect(count(byName.get("permission") ?? [], "permission.asked")).toBe(1)
    expect(count(byName.get("permission") ?? [], "permission.replied")).toBe(1)
    const background = byName.get("background-task") ?? []
    // The terminal task_updated, then the notification's refinement (summary, output file).
    expect([count(background, "task.started"), count(background, "task.completed"), count(background, "session.idle")]).toEqual([1, 2, 1])
    const interrupt = byName.get("interrupt") ?? []
    expect(interrupt.some((e) => e.type === "session.error" && e.properties.error?.name === "MessageAbortedError")).toBe(true)
    expect(parts("compact").some((p) => p.type === "compaction" && !p.auto)).toBe(true)
    expect(count(byName.get("compact") ?? [], "session.compacted")).toBe(1)
    const retry = byName.get("retry") ?? []
    expect(retry.some((e) => e.type === "session.status" && e.properties.status.type === "retry")).toBe(true)
    expect(parts("retry").some((p) => p.type === "retry" && p.attempt === 1)).toBe(true)
  })

  for (const capture of olderCaptures()) {
    it(`keeps the invariants over the older release's ${capture.name}`, () => {
      expect(Invariants.check(translate(capture))).toBeUndefined()
    })
  }
})

describe("EventTranslator as a Stream transducer", () => {
  it.effect("gives what stepping gives", () =>
    Effect.gen(function*() {
      const capture = captures().find((c) => c.name === "two-tools")!
      const streamed = yield* Stream.fromIterable(capture.events).pipe(
        EventTranslator.withTurns,
        EventTranslator.translate({ cliSessionId: capture.cliSessionId }),
        Stream.runCollect
      )
      expect(Chunk.toReadonlyArray(streamed)).toEqual(translate(capture))
    }))
})

describe("legacy mode", () => {
  it("dual-writes the flat events beside the canonical ones", () => {
    const capture = captures().find((c) => c.name === "permission")!
    const canonical = translate(capture)
    const legacy = translate(capture, { legacy: true })
    const flat = legacy.filter((e) => Canonical.legacyEventTypes.has(e.type))
    expect(legacy.filter((e) => !Canonical.legacyEventTypes.has(e.type))).toEqual(canonical)
    expect(new Set(flat.map((e) => e.type))).toEqual(
      new Set(["session.message", "session.control_request", "session.result"])
    )
    expect(Invariants.check(legacy)).toBeUndefined()
  })

  it("writes session.stream_event for partial messages", () => {
    const capture = captures().find((c) => c.name === "text-thinking")!
    expect(count(translate(capture, { legacy: true }), "session.stream_event")).toBe(
      capture.events.filter((e) => e._tag === "Message" && e.message.type === "stream_event").length
    )
  })
})

describe("Ids", () => {
  it("are opencode-shaped and sort by key", () => {
    const a = Ids.make("msg", Ids.sortKey(1_700_000_000_000, 1), "x")
    const b = Ids.make("msg", Ids.sortKey(1_700_000_000_000, Ids.ASSISTANT_ORDINAL), "a")
    const c = Ids.make("msg", Ids.sortKey(1_700_000_000_001, 1), "0")
    expect(a).toMatch(/^msg_[0-9a-f]{12}[0-9A-Za-z]{14}$/)
    expect([c, b, a].sort()).toEqual([a, b, c])
    expect(Ids.keyOf(a)).toBe(Ids.sortKey(1_700_000_000_000, 1))
  })

  it("are a function of the CLI's identifiers", () => {
    expect(Ids.session("63d161b6-9ec8-43d9-9b33-27a07091d9ff")).toBe(Ids.session("63d161b6-9ec8-43d9-9b33-27a07091d9ff"))
    expect(Ids.session("63d161b6-9ec8-43d9-9b33-27a07091d9ff")).not.toBe(Ids.session("63d161b6-9ec8-43d9-9b33-27a07091d9fe"))
    const message = Ids.seed("s/m")
    const parts = [0, 1, 2, 10].map((i) => Ids.part(42, Ids.Slot.block(i), message))
    expect([...parts].sort()).toEqual(parts)
    expect(new Set(parts.map((id) => id.slice(-10))).size).toBe(4)
    expect(Ids.part(42, Ids.Slot.stepStart, message) < parts[0]!).toBe(true)
    expect(Ids.part(42, Ids.Slot.stepFinish, message) > parts[3]!).toBe(true)
  })
})

describe("what the host knows of the session", () => {
  const capture = captures().find((c) => c.name === "two-tools")!
  const created = 1_790_000_000_000
  const host: EventTranslator.HostInfo = { title: "Two tools", created, projectID: "prj_test", version: "skein" }
  const infos = (events: ReadonlyArray<Canonical.CanonicalEvent>) =>
    events.flatMap((e) => (e.type === "session.updated" ? [e.properties.info] : []))
  const isSystem = (input: EventTranslator.Input, subtype: string) =>
    input._tag === "Cli" && input.event._tag === "Message" && input.event.message.type === "system" &&
    input.event.message.subtype === subtype

  /** The capture's inputs, with a rename right after `init`. */
  const renamedAfterInit = Effect.map(Stream.runCollect(EventTranslator.withTurns(Stream.fromIterable(capture.events))), (chunk) =>
    Chunk.toReadonlyArray(chunk).flatMap((input): ReadonlyArray<EventTranslator.Input> =>
      isSystem(input, "init") ? [input, { _tag: "Retitled", title: "Renamed" }] : [input]
    ))

  it("is what session.updated carries at init and at status, with the same ids", () => {
    const events = translate(capture, { host })
    const [init, ...rest] = infos(events)
    expect(init).toMatchObject({ title: "Two tools", projectID: "prj_test", version: "skein", time: { created } })
    expect(init?.time.updated).toBeGreaterThanOrEqual(created)
    expect(rest.length).toBeGreaterThan(0)
    for (const info of rest) expect(info).toMatchObject({ title: "Two tools", projectID: "prj_test", time: { created } })
    expect(events.map((e) => e.type)).toEqual(translate(capture).map((e) => e.type))
    expect(init?.id).toBe(infos(translate(capture))[0]?.id)
  })

  it.effect("takes a rename: it emits nothing, and the next session.updated (at status) has the new title", () =>
    Effect.gen(function*() {
      const inputs = yield* renamedAfterInit
      let state = EventTranslator.initial({ cliSessionId: capture.cliSessionId, host })
      const out: Array<Canonical.CanonicalEvent> = []
      for (const input of inputs) {
        const [next, events] = EventTranslator.step(state, input)
        if (input._tag === "Retitled") expect(events).toEqual([])
        state = next
        out.push(...events)
      }
      const statuses = inputs.filter((i) => isSystem(i, "status"))
      expect(statuses.length).toBeGreaterThan(0)
      expect(infos(out).map((i) => i.title)).toEqual(["Two tools", ...statuses.map(() => "Renamed")])
    }))

  it("without it, a session.updated has no title, project or creation time, as before", () => {
    for (const info of infos(translate(capture))) {
      expect(info.title).toBe("")
      expect(info.time.created).toBe(0)
      expect(info).not.toHaveProperty("projectID")
      expect(info).not.toHaveProperty("version")
    }
  })
})

describe("the host's prompts", () => {
  const run = (inputs: ReadonlyArray<EventTranslator.Input>) => {
    let state = EventTranslator.initial({ cliSessionId: "00000000-0000-4000-8000-000000000001" })
    return inputs.map((input) => {
      const [next, events] = EventTranslator.step(state, input)
      state = next
      return events.map((e) => e.type === "message.updated" ? `user ${String((e.properties.info as { id: string }).id).slice(0, 8)}` : e.type)
    })
  }
  const prompt = (uuid: string, text: string): EventTranslator.Input => ({ _tag: "Prompted", prompt: { uuid, content: text, at: 5 } })

  it("one shows at once when idle; the next waits for the idle that lets the CLI read it, then shows", () => {
    const steps = run([
      prompt("00000000-0000-4000-8000-00000000000a", "one"),
      prompt("00000000-0000-4000-8000-00000000000b", "two"),
      { _tag: "TurnStarted", turn: 1, origin: "cli" },
      { _tag: "TurnEnded", turn: 1, interrupted: false },
      { _tag: "TurnStarted", turn: 2, origin: "cli" },
      prompt("00000000-0000-4000-8000-00000000000c", "three"),
      { _tag: "TurnEnded", turn: 2, interrupted: false },
      { _tag: "TurnStarted", turn: 3, origin: "cli" },
      { _tag: "TurnEnded", turn: 3, interrupted: false }
    ])
    expect(steps).toEqual([
      ["user msg_0000", "message.part.updated"],
      [],
      ["session.status"],
      ["session.status", "session.idle", "user msg_0000", "message.part.updated"],
      ["session.status"],
      [],
      ["session.status", "session.idle", "user msg_0000", "message.part.updated"],
      ["session.status"],
      ["session.status", "session.idle"]
    ])
  })
})

describe("a message's time.created", () => {
  // opencode's TUI keys a message by `time.created` and id, and orders by both:
  // a date that changes between updates lists the message twice.
  const createdById = (events: ReadonlyArray<Canonical.CanonicalEvent>) => {
    const byId = new Map<string, Array<number>>()
    for (const e of events) {
      if (e.type !== "message.updated") continue
      byId.set(e.properties.info.id, [...(byId.get(e.properties.info.id) ?? []), e.properties.info.time.created])
    }
    return byId
  }

  for (const name of ["text-thinking", "two-tools"]) {
    it(`live (${name}), is when the stream opened, in every update of the message`, () => {
      const capture = captures().find((c) => c.name === name)!
      let state = EventTranslator.initial({ cliSessionId: capture.cliSessionId })
      const out: Array<Canonical.CanonicalEvent> = []
      capture.events.forEach((event, i) => {
        const receivedAt = 1_800_000_000_000 + i
        const [next, events] = EventTranslator.step(state, { _tag: "Cli", event, receivedAt })
        state = next
        out.push(...events)
      })
      const byId = createdById(out)
      const assistants = [...byId].filter(([, times]) => times.length > 1)
      expect(assistants.length).toBeGreaterThan(0)
      for (const [, times] of assistants) {
        expect(new Set(times).size).toBe(1)
        expect(times[0]).toBeGreaterThanOrEqual(1_800_000_000_000)
      }
    })
  }
})

describe("an interrupted reply", () => {
  it("carries MessageAbortedError, as opencode marks a reply cut short; a finished one carries no error", () => {
    const infos = (name: string) =>
      History.collect(translate(captures().find((c) => c.name === name)!)).flatMap((m) => (m.info.role === "assistant" ? [m.info] : []))
    const interrupted = infos("interrupt")
    expect(interrupted.length).toBeGreaterThan(0)
    expect(interrupted.at(-1)?.error?.name).toBe("MessageAbortedError")
    for (const info of infos("two-tools")) expect(info.error).toBeUndefined()
  })
})

describe("task_updated (CLI 2.1.332)", () => {
  it("a background task killed before it ends: the patch's killed status is its task.completed (stopped), refined by the notification", () => {
    const capture = captures().find((c) => c.name === "background-task-killed")!
    const tasks = translate(capture).filter((e) => e.type.startsWith("task."))
    expect(tasks.map((e) => [e.type, "status" in e.properties ? e.properties.status : undefined])).toEqual([
      ["task.started", undefined],
      ["task.completed", "stopped"],
      ["task.completed", "stopped"]
    ])
    const [, fromPatch, fromNotification] = tasks
    expect(fromPatch!.properties).toMatchObject({ taskID: "bawtey4hu", toolUseID: "toolu_fake_0001_0", summary: "Wait a minute" })
    expect(fromNotification!.properties).toMatchObject({ taskID: "bawtey4hu", outputFile: expect.stringContaining("bawtey4hu.output") })
  })

  it("a status on its way is a task.progress with what the task is; a patch without a status adds nothing", () => {
    const sessionID = "5e55a1d0-0000-4000-8000-00000000b001"
    const system = (subtype: string, fields: Record<string, unknown>) => ({ type: "system", subtype, uuid: crypto.randomUUID(), session_id: sessionID, ...fields })
    const lines = [
      system("task_started", { task_id: "t1", tool_use_id: "toolu_1", description: "Build it", task_type: "local_bash" }),
      system("task_updated", { task_id: "t1", patch: { status: "running" } }),
      system("task_updated", { task_id: "t1", patch: { is_backgrounded: true } }),
      system("task_notification", { task_id: "t1", status: "failed", output_file: "/tmp/t1.output", summary: "exit 1" }),
      system("task_updated", { task_id: "t1", patch: { status: "failed", end_time: 1 } })
    ]
    const events = Lenient.decodeAll(CliMessage.decoder, Buffer.from(lines.map((l) => JSON.stringify(l)).join("\n") + "\n"))
    const out = EventTranslator.translateAll({ cliSessionId: sessionID }, events).filter((e) => e.type.startsWith("task."))
    expect(out.map((e) => e.type)).toEqual(["task.started", "task.progress", "task.completed"])
    expect(out[1]!.properties).toMatchObject({ taskID: "t1", description: "Build it", summary: "running" })
    expect(out[2]!.properties).toMatchObject({ status: "failed", summary: "exit 1" })
  })
})
