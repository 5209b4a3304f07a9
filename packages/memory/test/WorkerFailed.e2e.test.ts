/**
 * Issue 25, "a worker turn that failed fails the job": the real CLI against
 * FakeModel, which answers the main turn and refuses the memory worker's
 * request with an API error. A dream must then roll its lock back (the
 * previous mtime restored, or the lock deleted if there was none) and end
 * failed; an extraction must fail and leave its cursor where it was.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { FileLock, ProcessHost, TaskManager } from "@skein/kernel"
import { Dream, DreamGates, Extraction, ExtractionCursor, MemoryEvents, MemoryFolder } from "@skein/memory"
import { Session, Worker } from "@skein/session"
import { TranscriptLayout } from "@skein/store"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Layer, Option, Queue } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Live from "./live.js"

const isJob = (marker: string): FakeModel.RequestMatch => (request) =>
  FakeModel.isConversation(request) && FakeModel.messagesText(request).includes(marker)
const dreamRequest = isJob("skein memory consolidation (dream).")
const extractionRequest = isJob("skein memory extraction.")
const mainRequest: FakeModel.RequestMatch = (request) =>
  FakeModel.isConversation(request) && !FakeModel.messagesText(request).includes("skein memory")

/** A 400 the CLI does not retry for long: its turn ends with its own error message instead of an answer. */
const refused = FakeModel.error(400, "invalid_request_error", "the worker's request was refused")

/**
 * A parent session with one answered turn, its worker pool, the services the
 * jobs need, and an event subscription. Every request of the worker that
 * `refuse` matches is refused (the CLI may try a refused request again).
 */
const setup = (refuse: FakeModel.RequestMatch) =>
  Effect.gen(function*() {
    const d = yield* ClaudeCli.offlineDirs("skein-worker-failed-")
    const model = yield* FakeModel.make({
      replies: [FakeModel.matching(FakeModel.text("Noted."), mainRequest)],
      fallback: (request) => refuse(request) ? refused : FakeModel.text("Noted.")
    })
    const tasks = yield* TaskManager.make({ root: Path.join(d.root, "tasks") })
    const stores = yield* Live.stores(d)
    const events = yield* MemoryEvents.make
    const seen = yield* events.subscribe
    const launch = Live.launchOf(model, d)
    const parent = yield* Session.start(launch)
    yield* Effect.flatMap(parent.send("Remember: we deploy on Tuesdays only."), (t) => t.result)
    const workers = yield* Worker.pool(parent, { launch }).pipe(Effect.provide(stores), Effect.provideService(TaskManager.TaskManager, tasks))
    const provide = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      effect.pipe(Effect.provide(stores), Effect.provideService(TaskManager.TaskManager, tasks), Effect.provideService(MemoryEvents.MemoryEvents, events))
    const memoryDir = MemoryFolder.directory(d.configDir, d.cwd)
    Fs.mkdirSync(memoryDir, { recursive: true })
    return { d, model, tasks, parent, workers, launch, provide, seen, memoryDir }
  })

const layer = Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer)

describe("memory jobs whose worker's turn failed", () => {
  it.scopedLive("a dream whose worker failed rolls its lock back to the previous mtime and ends failed with the CLI's words", () =>
    Effect.gen(function*() {
      const { launch, memoryDir, model, provide, seen, tasks, workers } = yield* setup(dreamRequest)
      const lock = DreamGates.lockPath(memoryDir)
      yield* Effect.scoped(Effect.flatMap(FileLock.acquire(lock), (held) => held.commit))
      const lastRun = new Date(Date.now() - 25 * 3_600_000)
      Fs.utimesSync(lock, lastRun, lastRun)
      const before = Fs.statSync(lock, { bigint: true }).mtimeNs

      const dream = yield* provide(Dream.make({ workers, launch }))
      const record = yield* tasks.await((yield* provide(dream.run)).id)
      expect(record.status).toBe("failed")
      expect(record.error).toMatch(/the worker's request was refused|API Error/)
      // Not committed: the last consolidation is still the one of a day ago, and nobody holds the lock.
      expect(Fs.statSync(lock, { bigint: true }).mtimeNs).toBe(before)
      expect(Option.map(yield* FileLock.status(lock), (s) => Option.isNone(s.pid))).toEqual(Option.some(true))
      const events = yield* Queue.takeAll(seen)
      expect([...events].map((e) => `${e.job}:${e._tag}`)).toEqual(["dream:Started", "dream:Failed"])
      expect((yield* model.requests).some(dreamRequest)).toBe(true)
    }).pipe(Effect.provide(layer)), 120_000)

  it.scopedLive("a dream whose worker failed, with no lock before, leaves no lock", () =>
    Effect.gen(function*() {
      const { launch, memoryDir, provide, tasks, workers } = yield* setup(dreamRequest)
      const dream = yield* provide(Dream.make({ workers, launch }))
      const record = yield* tasks.await((yield* provide(dream.run)).id)
      expect(record.status).toBe("failed")
      expect(Fs.existsSync(DreamGates.lockPath(memoryDir))).toBe(false)
    }).pipe(Effect.provide(layer)), 120_000)

  it.scopedLive("an extraction whose worker failed fails and does not move its cursor", () =>
    Effect.gen(function*() {
      const { d, launch, parent, provide, seen, workers } = yield* setup(extractionRequest)
      const extraction = yield* provide(Extraction.make({ workers, launch }))
      yield* extraction.extract
      const events = [...(yield* Queue.takeAll(seen))]
      expect(events.map((e) => `${e.job}:${e._tag}`)).toEqual(["extraction:Started", "extraction:Failed"])
      const failed = events.find((e) => e._tag === "Failed")
      expect(failed !== undefined && "reason" in failed ? failed.reason : "").toMatch(/the worker's request was refused|API Error/)
      const projectDir = TranscriptLayout.projectDir(d.configDir, yield* TranscriptLayout.canonicalCwd(d.cwd))
      const cursor = ExtractionCursor.file(projectDir, yield* parent.sessionId)
      expect(Option.isNone(yield* ExtractionCursor.load(cursor))).toBe(true)
    }).pipe(Effect.provide(layer)), 120_000)
})
