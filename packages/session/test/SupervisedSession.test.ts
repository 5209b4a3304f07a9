/**
 * SupervisedSession's policy, with FakeCli: off by default, bounded in time
 * when on, the backoff back at its base after a healthy run, failures a
 * retry cannot fix never retried, and the cause of a stop reaching callers.
 */
import { describe, expect, it } from "@effect/vitest"
import { ProcessHost } from "@skein/kernel"
import { FakeCli } from "@skein/testkit"
import { Duration, Effect, Option, Stream } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as SupervisedSession from "../src/SupervisedSession.js"
import { fake } from "./fake.js"

const fakeSessionId = "5e55a1d0-0000-4000-8000-00000000f009"

/** A CLI config root of its own, removed with the scope. */
const configRoot = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-supervised-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

/** What `--resume <fakeSessionId>` looks for: the transcript in some project of the root. */
const writeTranscript = (root: string) =>
  Effect.sync(() => {
    const dir = Path.join(root, "projects", "-tmp-fake-cli")
    Fs.mkdirSync(dir, { recursive: true })
    Fs.writeFileSync(Path.join(dir, `${fakeSessionId}.jsonl`), "")
  })

/** One turn, then the CLI dies: every incarnation runs this script. */
const crashAfterEachTurn: FakeCli.Script = [
  ...FakeCli.textTurn("done", { sessionId: fakeSessionId }),
  FakeCli.stderr("fake-cli: killed after the turn\n"),
  FakeCli.exit(1)
]

/** The delays of the restarts, in millis, as the session announces them. */
const collectDelays = (supervised: SupervisedSession.SupervisedSession) =>
  Effect.gen(function*() {
    const delays: Array<number> = []
    yield* supervised.status.changes.pipe(
      Stream.runForEach((s) => Effect.sync(() => s._tag === "Restarting" && delays.push(Duration.toMillis(s.delay)))),
      Effect.forkScoped
    )
    return delays
  })

/**
 * The error `effect` fails with. Should it succeed, the test fails with a
 * string: a session or a turn as the failure would have vitest format an
 * object graph without end.
 */
const failure = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<E, string> =>
  Effect.flip(Effect.as(effect, "succeeded, where a failure was expected"))

/** Why the session stopped, once it has. */
const stopped = (supervised: SupervisedSession.SupervisedSession) =>
  supervised.status.changes.pipe(
    Stream.filterMap((s) => s._tag === "Closed" ? Option.some(s.cause) : Option.none()),
    Stream.runHead,
    Effect.flatten
  )

describe("SupervisedSession (FakeCli)", () => {
  it.scopedLive("without restart, a crash closes the session, and callers see the crash", () =>
    Effect.gen(function*() {
      const supervised = yield* SupervisedSession.start(fake(FakeCli.crashMidTurn({ code: 9 })))
      const turn = yield* supervised.send("go")
      expect(yield* failure(turn.result)).toMatchObject({ _tag: "CliExited", code: 9 })
      expect(yield* failure(supervised.current)).toMatchObject({ _tag: "CliExited", code: 9 })
      expect(yield* failure(supervised.send("again"))).toMatchObject({ _tag: "CliExited", code: 9 })
      expect(yield* supervised.restarts.get).toBe(0)
    }).pipe(Effect.provide(ProcessHost.layerMemory())))

  it.scopedLive("a CLI that exits because the host ended it is not restarted", () =>
    Effect.gen(function*() {
      const supervised = yield* SupervisedSession.start(
        { ...fake([...FakeCli.textTurn("only turn"), FakeCli.waitForEnd]), restart: true }
      )
      expect((yield* Effect.flatMap(supervised.send("hi"), (t) => t.result)).text).toBe("only turn")
      const session = yield* supervised.current
      yield* supervised.end
      expect((yield* session.exit).code).toBe(0)
      expect(yield* failure(supervised.current)).toMatchObject({ _tag: "SessionClosed" })
      expect(yield* supervised.restarts.get).toBe(0)
    }).pipe(Effect.provide(ProcessHost.layerMemory())))
})

describe("failure 9: SupervisedSession hides why it stopped, and counts restarts over its whole life", () => {
  it.scopedLive("failure 9: a CLI that cannot be spawned is not retried: SpawnFailed reaches current, send and sessionId", () =>
    Effect.gen(function*() {
      const supervised = yield* SupervisedSession.start({
        ...fake(FakeCli.textTurn("never")),
        executable: "/nonexistent/skein-failure-9/claude",
        restart: true
      })
      const cause = yield* failure(supervised.current)
      expect(cause).toMatchObject({ _tag: "SpawnFailed", command: "/nonexistent/skein-failure-9/claude" })
      expect(yield* failure(supervised.send("hi"))).toBe(cause)
      expect(yield* failure(supervised.sessionId)).toBe(cause)
      expect(yield* failure(supervised.interrupt)).toBe(cause)
      expect(yield* supervised.restarts.get).toBe(0)
      expect(yield* supervised.status.get).toMatchObject({ _tag: "Closed", cause: { _tag: "SpawnFailed" } })
    }).pipe(Effect.provide(ProcessHost.layerMemory())))

  it.scopedLive("failure 9: a restart whose transcript is missing is not retried: ResumeMismatch reaches the next send", () =>
    Effect.gen(function*() {
      // The CLI reports a session id but wrote no transcript: `--resume` of it cannot work, now or later.
      const root = yield* configRoot
      const supervised = yield* SupervisedSession.start({ ...fake(crashAfterEachTurn, { configDir: root }), restart: true })
      expect((yield* Effect.flatMap(supervised.send("one"), (t) => t.result)).text).toBe("done")
      const cause = yield* stopped(supervised)
      expect(cause).toMatchObject({ _tag: "ResumeMismatch", expected: fakeSessionId })
      expect(yield* failure(supervised.send("two"))).toBe(cause)
      expect(yield* failure(supervised.current)).toBe(cause)
      expect(yield* supervised.restarts.get).toBe(1)
    }).pipe(Effect.provide(ProcessHost.layerMemory())))

  it.scopedLive("failure 9: past the restart intensity, callers see the last CliExited with its stderr", () =>
    Effect.gen(function*() {
      // Dies before it answers initialize: 2 restarts within the period, then the third crash stops the session.
      const supervised = yield* SupervisedSession.start({
        ...fake([FakeCli.stderr("fake-cli: broken\n"), FakeCli.exit(1)]),
        restart: { maxRestarts: 2, base: "10 millis" }
      })
      const cause = yield* stopped(supervised)
      expect(cause).toMatchObject({ _tag: "CliExited", code: 1 })
      expect(cause._tag === "CliExited" && cause.stderrTail).toContain("fake-cli: broken")
      expect(yield* failure(supervised.current)).toBe(cause)
      expect(yield* failure(supervised.send("hi"))).toBe(cause)
      expect(yield* supervised.restarts.get).toBe(2)
    }).pipe(Effect.provide(ProcessHost.layerMemory())))

  it.scopedLive("failure 9: a CLI killed after every turn keeps resuming: the 12th turn succeeds, every delay stays at the base", () =>
    Effect.gen(function*() {
      const root = yield* configRoot
      yield* writeTranscript(root)
      // The crashes come faster than 5 in 60 s here (the kernel's tests drive the window on a TestClock).
      const supervised = yield* SupervisedSession.start({
        ...fake(crashAfterEachTurn, { configDir: root }),
        restart: { maxRestarts: 20 }
      })
      const delays = yield* collectDelays(supervised)
      for (let i = 0; i < 12; i++) {
        // Each turn goes to the next CLI, not into the one dying after the last turn.
        yield* supervised.restarts.changes.pipe(Stream.filter((n) => n >= i), Stream.runHead)
        const summary = yield* Effect.flatMap(supervised.send(`turn ${i + 1}`), (t) => t.result)
        expect(summary.text).toBe("done")
      }
      expect(yield* supervised.restarts.get).toBe(11)
      expect(yield* supervised.sessionId).toBe(fakeSessionId)
      expect(delays.length).toBeGreaterThanOrEqual(11)
      expect(new Set(delays)).toEqual(new Set([200]))
    }).pipe(Effect.provide(ProcessHost.layerMemory())), 120_000)
})
