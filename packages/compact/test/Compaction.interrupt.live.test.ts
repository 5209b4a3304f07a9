/**
 * Interrupt safety of a pass over a live session with the real CLI. A pass
 * is interrupted, deterministically, at each step: with the CLI down and
 * nothing written (`onStep("stopped")`), in the middle of the append (a
 * FileSystem whose write tears the line and fails, or blocks until told),
 * and with the boundary written but the CLI not yet resumed
 * (`onStep("written")`). Each time the transcript loads (the old view or
 * the new one, nothing in between) and the session answers its next turn
 * with the same id.
 */
import { TaskManager } from "@skein/kernel"
import * as PlatformError from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { ResumeLoader, TranscriptLayout, TranscriptStore } from "@skein/store"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Deferred, Effect, Exit, Fiber, Layer, Option, Ref } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CompactableSession from "../src/CompactableSession.js"
import * as Compaction from "../src/Compaction.js"
import * as SessionMemoryCompaction from "../src/SessionMemoryCompaction.js"
import * as TokenCounter from "../src/TokenCounter.js"
import * as Live from "./live.js"

const SUMMARY = "Two questions about rivers were answered: the Nile, then the Amazon."

/** What the next write to a transcript does. */
type Fault =
  | { readonly _tag: "None" }
  | { readonly _tag: "Tear" }
  | { readonly _tag: "Block"; readonly entered: Deferred.Deferred<void>; readonly release: Deferred.Deferred<void> }

const tornError = (path: string) =>
  new PlatformError.SystemError({ reason: "Unknown", module: "FileSystem", method: "writeAll", pathOrDescriptor: path, description: "disk gone mid-write" })

/** The platform FileSystem, except that writes to `.jsonl` files obey `fault` once. */
const faultyFs = (fault: Ref.Ref<Fault>) =>
  Layer.effect(
    FileSystem.FileSystem,
    Effect.map(FileSystem.FileSystem, (fs) =>
      FileSystem.FileSystem.of({
        ...fs,
        open: (path, options) =>
          Effect.map(fs.open(path, options), (file): FileSystem.File =>
            !path.endsWith(".jsonl") ? file : {
              [FileSystem.FileTypeId]: FileSystem.FileTypeId,
              fd: file.fd,
              get stat() {
                return file.stat
              },
              seek: (offset, from) => file.seek(offset, from),
              sync: file.sync,
              read: (buffer) => file.read(buffer),
              readAlloc: (size) => file.readAlloc(size),
              truncate: (length) => file.truncate(length),
              write: (buffer) => file.write(buffer),
              writeAll: (buffer) =>
                Effect.flatMap(Ref.getAndSet(fault, { _tag: "None" }), (now) => {
                  switch (now._tag) {
                    case "None":
                      return file.writeAll(buffer)
                    case "Tear":
                      return Effect.zipRight(file.writeAll(buffer.subarray(0, Math.floor(buffer.length / 2))), Effect.fail(tornError(path)))
                    case "Block":
                      return Deferred.succeed(now.entered, undefined).pipe(
                        Effect.zipRight(Deferred.await(now.release)),
                        Effect.zipRight(file.writeAll(buffer))
                      )
                  }
                })
            })
      }))
  )

/** The store over `root`, writing through the faulty FileSystem; everything else reads the platform's. */
const storeLayer = (root: string, fault: Ref.Ref<Fault>) =>
  TranscriptStore.layer.pipe(
    Layer.provide(faultyFs(fault)),
    Layer.provideMerge(TranscriptLayout.layer(root)),
    Layer.provideMerge(NodeContext.layer),
    Layer.merge(TokenCounter.layer)
  )

/** A session of two turns with a `summary.md`, and a pass over it. */
const setup = Effect.gen(function*() {
  const model = yield* FakeModel.make({
    replies: [FakeModel.text("The first river is the Nile."), FakeModel.text("The second is the Amazon."), FakeModel.text("Third: the Danube.")]
  })
  const d = yield* ClaudeCli.offlineDirs("skein-compact-int-")
  const session = yield* CompactableSession.start(Live.sessionOptions(model, d))
  yield* Effect.flatMap(session.send(`first river? ${"Background detail. ".repeat(300)}`), (t) => t.result)
  yield* Effect.flatMap(session.send("second river?"), (t) => t.result)
  const live = yield* session.current
  const id = yield* live.sessionId
  const transcript = (yield* live.state.get).transcriptPath!
  const summaryFile = SessionMemoryCompaction.summaryPath(transcript)
  Fs.mkdirSync(Path.dirname(summaryFile), { recursive: true })
  Fs.writeFileSync(summaryFile, SUMMARY)
  const fault = yield* Ref.make<Fault>({ _tag: "None" })
  const tasks = yield* TaskManager.make({ root: Path.join(d.root, "tasks") })
  const pass = (onStep: (step: Compaction.Step) => Effect.Effect<void>) =>
    Compaction.run(session, { pass: "memory", window: { minTokens: 0, minTextMessages: 2 }, onStep }).pipe(
      Effect.provide(storeLayer(d.configDir, fault)),
      Effect.provideService(TaskManager.TaskManager, tasks)
    )
  return { model, session, id, transcript, fault, pass, bytes: Fs.readFileSync(transcript) }
})

type Setup = Effect.Effect.Success<typeof setup>

/** The transcript loads as the old view (`compacted: false`) or the new one, and every line is whole. */
const loads = (s: Setup, compacted: boolean) =>
  Effect.gen(function*() {
    const text = Fs.readFileSync(s.transcript, "utf8")
    expect(text.endsWith("\n")).toBe(true)
    for (const line of text.trimEnd().split("\n")) expect(() => JSON.parse(line)).not.toThrow()
    // Old lines are never touched.
    expect(Fs.readFileSync(s.transcript).subarray(0, s.bytes.length).equals(s.bytes)).toBe(true)
    const view = yield* ResumeLoader.load(s.transcript)
    expect(Option.isSome(view.boundary)).toBe(compacted)
    const texts = view.messages.map(Live.textOf).join("\n")
    expect(texts.includes("first river?")).toBe(!compacted)
    expect(texts.includes(SUMMARY)).toBe(compacted)
    expect(texts).toContain("The second is the Amazon.")
  })

/** The session answers its next turn, as the same conversation, from the view on disk. */
const works = (s: Setup, compacted: boolean) =>
  Effect.gen(function*() {
    const third = yield* Effect.flatMap(s.session.send("third river?"), (t) => t.result)
    expect(third.text).toBe("Third: the Danube.")
    expect(yield* Effect.flatMap(s.session.current, (c) => c.sessionId)).toBe(s.id)
    const request = yield* s.model.awaitRequest(0, Live.withPrompt("third river?"))
    const text = FakeModel.messagesText(request)
    expect(text.includes("first river?")).toBe(!compacted)
    expect(text.includes(SUMMARY)).toBe(compacted)
    expect((yield* s.model.requests).some(FakeModel.isCompaction)).toBe(false)
  })

/** Interrupts the pass when `step` is reached: the hook never returns. */
const interruptAt = (s: Setup, at: Compaction.Step) =>
  Effect.gen(function*() {
    const reached = yield* Deferred.make<void>()
    const fiber = yield* Effect.fork(s.pass((step) => step === at ? Effect.zipRight(Deferred.succeed(reached, undefined), Effect.never) : Effect.void))
    yield* Deferred.await(reached)
    // The CLI is down: the session's state says a pass holds it.
    expect((yield* s.session.state.get).compaction?.compacting).toBe(true)
    const exit = yield* Fiber.interrupt(fiber)
    expect(Exit.isInterrupted(exit)).toBe(true)
    expect((yield* s.session.state.get).compaction).toMatchObject({ compacting: false, lastOutcome: "failed" })
  })

describe("Compaction.run interrupted, with the real CLI", () => {
  it.scopedLive("before the write (CLI down, nothing written): the old view, and the resumed CLI answers", () =>
    Effect.gen(function*() {
      const s = yield* setup
      yield* interruptAt(s, "stopped")
      yield* loads(s, false)
      yield* works(s, false)
    }).pipe(Effect.provide(Live.sessionLayer)), { timeout: 120_000 })

  it.scopedLive("mid-write, torn (the write fails half-way, boundary whole, summary cut): the file is cut back before the CLI resumes; the old view", () =>
    Effect.gen(function*() {
      const s = yield* setup
      const exit = yield* Effect.exit(s.pass((step) => step === "stopped" ? Ref.set(s.fault, { _tag: "Tear" }) : Effect.void))
      expect(Exit.isFailure(exit) && !Exit.isInterrupted(exit)).toBe(true)
      yield* loads(s, false)
      yield* works(s, false)
    }).pipe(Effect.provide(Live.sessionLayer)), { timeout: 120_000 })

  it.scopedLive("mid-write, interrupted (the write is under way): the append completes first; the new view", () =>
    Effect.gen(function*() {
      const s = yield* setup
      const entered = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const fiber = yield* Effect.fork(
        s.pass((step) => step === "stopped" ? Ref.set(s.fault, { _tag: "Block", entered, release }) : Effect.void)
      )
      yield* Deferred.await(entered)
      const interrupting = yield* Effect.fork(Fiber.interrupt(fiber))
      yield* Deferred.succeed(release, undefined)
      const exit = yield* Fiber.join(interrupting)
      expect(Exit.isInterrupted(exit)).toBe(true)
      yield* loads(s, true)
      yield* works(s, true)
    }).pipe(Effect.provide(Live.sessionLayer)), { timeout: 120_000 })

  it.scopedLive("after the write, before the resume: the new view, and the resumed CLI sends it", () =>
    Effect.gen(function*() {
      const s = yield* setup
      yield* interruptAt(s, "written")
      yield* loads(s, true)
      yield* works(s, true)
    }).pipe(Effect.provide(Live.sessionLayer)), { timeout: 120_000 })
})
