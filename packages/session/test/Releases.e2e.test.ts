/**
 * End-to-end across CLI releases: the same cases through `Session.start`,
 * against the pinned CLI (2.1.332, the default executable) and against the
 * last release of the 2.0 line (2.0.76, installed on demand by
 * `CliRelease.install`), each offline against FakeModel.
 *
 * The 2.0 line prints no `session_state_changed` and no `task_*` events, and
 * has no `--bare`: a session must learn from the stream how a turn ends.
 * Every turn is awaited with a bound, so a turn that never ends fails its
 * test instead of blocking the run.
 */
import { describe, expect, it } from "@effect/vitest"
import { CliRelease, FakeModel } from "@skein/testkit"
import { Chunk, Data, Duration, Effect, Fiber, Queue, Schedule, Stream } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Permissions from "../src/Permissions.js"
import * as Session from "../src/Session.js"
import type { SessionEvent, Turn, TurnSummary } from "../src/Turn.js"
import * as Live from "./live.js"

/** A turn that did not end within its bound; `seen` is the tail of what the session published. */
class TurnHung extends Data.TaggedError("TurnHung")<{ readonly message: string }> {}

const turnBound = Duration.seconds(30)

/** What a session published, as short kinds (`system/session_state_changed/idle`, `result/success`, …). */
const kindOf = (event: SessionEvent): string => {
  if (event._tag !== "Message") return event._tag
  const message = event.message
  switch (message.type) {
    case "system":
      return message.subtype === "session_state_changed"
        ? `system/${message.subtype}/${message.state}`
        : `system/${message.subtype}`
    case "control_request":
      return `control_request/${message.request.subtype}`
    case "result":
      return `result/${message.subtype}`
    default:
      return message.type
  }
}

/** The turn's summary, or `TurnHung` (with what the session published last) once `turnBound` has passed. */
const ended = (what: string, seen: ReadonlyArray<string>) =>
(turn: Turn): Effect.Effect<TurnSummary, TurnHung | Effect.Effect.Error<Turn["result"]>> =>
  turn.result.pipe(
    Effect.timeoutFail({
      duration: turnBound,
      onTimeout: () =>
        new TurnHung({
          message: `${what} did not end within ${Duration.format(turnBound)}; last events: ${
            seen.filter((kind) => kind !== "stream_event").slice(-12).join(", ")
          }`
        })
    })
  )

const collect = <A, E>(stream: Stream.Stream<A, E>) => Effect.map(Stream.runCollect(stream), Chunk.toReadonlyArray)

const isTextDelta = (event: SessionEvent): boolean =>
  event._tag === "Message" && event.message.type === "stream_event" && event.message.event.type === "content_block_delta"

const initVersion = (events: ReadonlyArray<SessionEvent>): string | undefined => {
  for (const event of events) {
    if (event._tag === "Message" && event.message.type === "system" && event.message.subtype === "init") {
      return event.message.claude_code_version
    }
  }
  return undefined
}

interface Release {
  readonly name: string
  readonly version: string
  /** What `Session.start` needs to run this release, beyond `Live.liveOptions`. */
  readonly options: Effect.Effect<Partial<Session.SessionOptions>, CliRelease.CliReleaseInstallError>
  /** Whether `--bare` exists (the 2.0 line has no such flag). */
  readonly hasBare: boolean
}

const releases: ReadonlyArray<Release> = [
  { name: "pinned CLI 2.1.332", version: "2.1.332", options: Effect.succeed({}), hasBare: true },
  {
    name: `old CLI ${CliRelease.defaultVersion}`,
    version: CliRelease.defaultVersion,
    options: Effect.map(CliRelease.install(), (release) => ({
      executable: release.command,
      executableArgs: release.args
    })),
    hasBare: false
  }
]

/**
 * The 2.0 line writes background-task output under `/tmp/claude/<cwd slug>/`
 * whatever TMPDIR says: remove this run's folder when the scope closes.
 */
const removeLegacyTaskDir = (cwd: string) =>
  Effect.addFinalizer(() =>
    Effect.sync(() => {
      Fs.rmSync(Path.join("/tmp/claude", cwd.replace(/[^a-zA-Z0-9]/g, "-")), { recursive: true, force: true })
      try {
        Fs.rmdirSync("/tmp/claude")
      } catch {
        // Not empty (another run's) or not there.
      }
    })
  )

/** Polls until `file` exists, for up to 15 s. */
const fileAppears = (file: string) =>
  Effect.suspend(() => Fs.existsSync(file) ? Effect.void : Effect.fail("missing")).pipe(
    Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("15 seconds"))),
    Effect.orElse(() => Effect.dieMessage(`${file} did not appear within 15 s`))
  )

const testTimeout = 150_000

for (const release of releases) {
  describe(`Session across releases: ${release.name}`, () => {
    /** A session on this release against `model`, in fresh offline dirs. */
    const start = (model: FakeModel.FakeModel["Type"], extra?: Partial<Session.SessionOptions>) =>
      Effect.gen(function*() {
        const d = yield* Live.dirs
        const own = yield* release.options
        const bare = release.hasBare && extra?.bare !== false
        const session = yield* Session.start(Live.liveOptions(model, d, { ...own, ...extra, bare }))
        const seen: Array<string> = []
        const events = yield* session.subscribe
        yield* Effect.forkScoped(Effect.forever(Effect.map(Queue.take(events), (event) => seen.push(kindOf(event)))))
        return { d, session, seen }
      })

    it.scopedLive("a plain turn ends with the model's text", () =>
      Effect.gen(function*() {
        const model = yield* FakeModel.make({ replies: [FakeModel.text("Hello across releases.")] })
        const { seen, session } = yield* start(model)
        const turn = yield* session.send("Say hello")
        const events = yield* Effect.fork(collect(turn.events))
        const summary = yield* ended("plain turn", seen)(turn)
        expect(summary.text).toBe("Hello across releases.")
        expect(summary.results).toHaveLength(1)
        expect(summary.interrupted).toBe(false)
        expect(initVersion(yield* Fiber.join(events))).toBe(release.version)
        const request = yield* model.awaitRequest(0, FakeModel.isConversation)
        expect(FakeModel.messagesText(request)).toContain("Say hello")
      }).pipe(Effect.provide(Live.layer)), testTimeout)

    it.scopedLive("two turns in a row each end, the second after the first", () =>
      Effect.gen(function*() {
        const model = yield* FakeModel.make({ replies: [FakeModel.text("First answer."), FakeModel.text("Second answer.")] })
        const { seen, session } = yield* start(model)
        const first = yield* Effect.flatMap(session.send("First question"), ended("first turn", seen))
        expect(first.text).toBe("First answer.")
        const second = yield* Effect.flatMap(session.send("Second question"), ended("second turn", seen))
        expect(second.text).toBe("Second answer.")
        const request = yield* model.awaitRequest(1, FakeModel.isConversation)
        expect(FakeModel.messagesText(request)).toContain("First answer.")
        expect(FakeModel.messagesText(request)).toContain("Second question")
      }).pipe(Effect.provide(Live.layer)), testTimeout)

    it.scopedLive("a permission allowed by the Permissions handler runs the tool", () =>
      Effect.gen(function*() {
        const model = yield* FakeModel.make({
          replies: [
            FakeModel.toolUse("Bash", { command: "touch allowed.txt && echo created", description: "Create a file" }),
            FakeModel.text("Created allowed.txt.")
          ]
        })
        const asked: Array<string> = []
        const { d, seen, session } = yield* start(model).pipe(
          Effect.provide(Permissions.layer((request) => {
            asked.push(request.toolName)
            return Effect.succeed(Permissions.allow())
          }))
        )
        const summary = yield* Effect.flatMap(session.send("Create allowed.txt"), ended("permission turn", seen))
        expect(summary.text).toBe("Created allowed.txt.")
        expect(asked).toEqual(["Bash"])
        expect(Fs.existsSync(Path.join(d.cwd, "allowed.txt"))).toBe(true)
        const followUp = yield* model.awaitRequest(1, FakeModel.isConversation)
        // The tool ran: its output went back to the model.
        expect(JSON.stringify(followUp.body)).toContain("created")
      }).pipe(Effect.provide(Live.layer)), testTimeout)

    it.scopedLive("a run_in_background Bash task: the turn ends, the task runs, and the next turn works", () =>
      Effect.gen(function*() {
        const model = yield* FakeModel.make({
          replies: [
            FakeModel.toolUse("Bash", {
              command: "sleep 1; echo background done > bg.txt",
              description: "Wait, then write",
              run_in_background: true
            }),
            FakeModel.text("Started it in the background.")
          ]
        })
        // Bash with run_in_background needs the full CLI on 2.1 (its --bare Bash has no such parameter).
        const { d, seen, session } = yield* start(model, { bare: false, allowedTools: ["Bash"] })
        yield* removeLegacyTaskDir(d.cwd)
        const summary = yield* Effect.flatMap(session.send("Run it in the background"), ended("background-task turn", seen))
        expect(summary.results.length).toBeGreaterThanOrEqual(1)
        expect(summary.results[0]?.subtype === "success" ? summary.results[0].result : undefined).toBe(
          "Started it in the background."
        )
        yield* fileAppears(Path.join(d.cwd, "bg.txt"))
        expect(Fs.readFileSync(Path.join(d.cwd, "bg.txt"), "utf8")).toBe("background done\n")
        const next = yield* Effect.flatMap(session.send("Anything else?"), ended("turn after the background task", seen))
        expect(next.interrupted).toBe(false)
        expect(next.results.length).toBeGreaterThanOrEqual(1)
      }).pipe(Effect.provide(Live.layer)), testTimeout)

    it.scopedLive("interrupt mid-stream ends the turn as interrupted, and the next turn works", () =>
      Effect.gen(function*() {
        const long = Array.from({ length: 60 }, (_, i) => `word${i}`).join(" ")
        const model = yield* FakeModel.make({
          replies: [FakeModel.withDelay(FakeModel.text(long), "100 millis"), FakeModel.text("Back again.")]
        })
        const { seen, session } = yield* start(model, { includePartialMessages: true })
        const turn = yield* session.send("Talk for a while")
        const interruptOnce = yield* Effect.once(session.interrupt)
        const events = yield* turn.events.pipe(
          Stream.tap((event) => isTextDelta(event) ? interruptOnce : Effect.void),
          collect,
          Effect.fork
        )
        const summary = yield* ended("interrupted turn", seen)(turn)
        expect(summary.interrupted).toBe(true)
        const delivered = yield* Fiber.join(events)
        expect(delivered.filter(isTextDelta).length).toBeLessThan(60)
        const next = yield* Effect.flatMap(session.send("Are you there?"), ended("turn after the interrupt", seen))
        expect(next.text).toBe("Back again.")
        expect(next.interrupted).toBe(false)
        const request = yield* model.awaitRequest(1, FakeModel.isConversation)
        expect(FakeModel.messagesText(request)).toContain("Are you there?")
      }).pipe(Effect.provide(Live.layer)), testTimeout)
  })
}
