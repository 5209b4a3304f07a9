/**
 * The warm pool: a session started with the pool in context takes a held
 * process (already initialized) and the pool replaces it; other options start
 * cold; closing the pool stops what it holds, and nothing it handed over.
 * Most cases run testkit's stand-in CLI (cheap enough to hold several); one
 * runs the real CLI against FakeModel.
 */
import { describe, expect, it } from "@effect/vitest"
import { ProcessHost } from "@skein/kernel"
import { FakeModel, StandInCli } from "@skein/testkit"
import { Effect, Exit, Layer, Scope, Stream } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Session from "../src/Session.js"
import * as SessionPool from "../src/SessionPool.js"
import * as Live from "./live.js"

const tempDir = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-pool-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

const standIn = (cwd: string, text = "canned"): Session.SessionOptions => {
  const cli = StandInCli.command({ text })
  return {
    cwd,
    executable: cli.command,
    executableArgs: cli.args,
    stopTimeouts: { stdinGrace: "2 seconds", termGrace: "1 second" }
  }
}

/** Builds the pool in `scope`, which the test closes itself. */
const poolIn = (scope: Scope.Scope, options: SessionPool.Options) =>
  Layer.buildWithScope(SessionPool.layer(options), scope).pipe(Effect.map((context) => context.pipe(Layer.succeedContext)))

/** The first set of held pids that satisfies `ready`. */
const heldWhen = (pool: SessionPool.SessionPool["Type"], ready: (pids: ReadonlyArray<number>) => boolean) =>
  pool.held.changes.pipe(Stream.filter(ready), Stream.runHead, Effect.flatten)

const turnText = (session: Session.Session, content: string) =>
  Effect.flatMap(session.send(content), (turn) => turn.result).pipe(Effect.map((summary) => summary.text))

describe("SessionPool", () => {
  it.scopedLive("hands over a warm process, already initialized, and starts a replacement", () =>
    Effect.gen(function*() {
      const profile = standIn(yield* tempDir)
      const poolScope = yield* Scope.make()
      const poolLayer = yield* poolIn(poolScope, { profiles: [profile], size: 1 })
      const pool = yield* Effect.provide(SessionPool.SessionPool, poolLayer)
      const [warmPid] = yield* heldWhen(pool, (pids) => pids.length === 1)

      const session = yield* Session.start(profile).pipe(Effect.provide(poolLayer))
      expect(session.pid).toBe(warmPid)
      expect((yield* session.initialize)?.["commands"]).toEqual([
        { name: "compact", description: "Clear history but keep a summary", argumentHint: "" }
      ])
      expect(yield* turnText(session, "one")).toBe("canned")

      // Replacement: the pool holds one again, a new process.
      const [replacement] = yield* heldWhen(pool, (pids) => pids.length === 1)
      expect(replacement).not.toBe(warmPid)
      expect(ProcessHost.isAlive(replacement!)).toBe(true)

      // The next session takes the replacement.
      const next = yield* Session.start(profile).pipe(Effect.provide(poolLayer))
      expect(next.pid).toBe(replacement)
      expect(yield* turnText(next, "two")).toBe("canned")

      // Closing the pool stops only what it holds: the sessions keep their processes.
      const [third] = yield* heldWhen(pool, (pids) => pids.length === 1)
      yield* Scope.close(poolScope, Exit.void)
      expect(ProcessHost.isAlive(third!)).toBe(false)
      expect(ProcessHost.isAlive(session.pid)).toBe(true)
      expect(yield* turnText(session, "after the pool")).toBe("canned")
    }).pipe(Effect.provide(ProcessHost.layerMemory())))

  it.scopedLive("options the pool does not hold start cold, and take nothing from it", () =>
    Effect.gen(function*() {
      const held = standIn(yield* tempDir)
      const other = yield* tempDir
      const poolLayer = yield* poolIn(yield* Effect.scope, { profiles: [held], size: 1 })
      const pool = yield* Effect.provide(SessionPool.SessionPool, poolLayer)
      const [warmPid] = yield* heldWhen(pool, (pids) => pids.length === 1)

      // Another cwd, another reply text (so other args), another env, another system prompt: each a miss.
      const misses: ReadonlyArray<Session.SessionOptions> = [
        standIn(other),
        standIn(held.cwd, "other"),
        { ...held, env: { SKEIN_POOL_TEST: "1" } },
        { ...held, systemPrompt: "Be brief." }
      ]
      for (const options of misses) {
        const session = yield* Session.start(options).pipe(Effect.provide(poolLayer))
        expect(session.pid).not.toBe(warmPid)
        expect(yield* session.initialize).toBeDefined()
        expect(yield* turnText(session, "hi")).toBe(options === misses[1] ? "other" : "canned")
      }
      expect(yield* pool.held.get).toEqual([warmPid])
    }).pipe(Effect.provide(ProcessHost.layerMemory())))

  it.scopedLive("a held process that dies is dropped and replaced, never handed over", () =>
    Effect.gen(function*() {
      const profile = standIn(yield* tempDir)
      const poolLayer = yield* poolIn(yield* Effect.scope, { profiles: [profile], size: 1 })
      const pool = yield* Effect.provide(SessionPool.SessionPool, poolLayer)
      const [first] = yield* heldWhen(pool, (pids) => pids.length === 1)
      process.kill(first!, "SIGKILL")
      const [replacement] = yield* heldWhen(pool, (pids) => pids.length === 1 && pids[0] !== first)
      const session = yield* Session.start(profile).pipe(Effect.provide(poolLayer))
      expect(session.pid).toBe(replacement)
      expect(yield* turnText(session, "hi")).toBe("canned")
    }).pipe(Effect.provide(ProcessHost.layerMemory())))

  it.scopedLive("closing the pool leaves no process; a size of 0 holds none", () =>
    Effect.gen(function*() {
      const a = standIn(yield* tempDir)
      const b = standIn(yield* tempDir)
      const poolScope = yield* Scope.make()
      const poolLayer = yield* poolIn(poolScope, { profiles: [a, b, a], size: 2 })
      const pool = yield* Effect.provide(SessionPool.SessionPool, poolLayer)
      // A profile listed twice is held once.
      const pids = yield* heldWhen(pool, (pids) => pids.length === 4)
      expect(pids.every(ProcessHost.isAlive)).toBe(true)
      yield* Scope.close(poolScope, Exit.void)
      expect(pids.filter(ProcessHost.isAlive)).toEqual([])
      expect(yield* pool.held.get).toEqual([])

      // A closed pool is a miss: the start is cold.
      const session = yield* Session.start(a).pipe(Effect.provide(poolLayer))
      expect(pids).not.toContain(session.pid)
      expect(yield* turnText(session, "hi")).toBe("canned")

      const off = yield* poolIn(yield* Effect.scope, { profiles: [a], size: 0 })
      expect(yield* Effect.provide(Effect.flatMap(SessionPool.SessionPool, (p) => p.held.get), off)).toEqual([])
    }).pipe(Effect.provide(ProcessHost.layerMemory())))

  it.scopedLive("with the real CLI: the taken process runs the first turn against the model", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.text("Warm hello.")] })
      const profile = Live.liveOptions(model, yield* Live.dirs)
      const poolLayer = yield* poolIn(yield* Effect.scope, { profiles: [profile], size: 1 })
      const pool = yield* Effect.provide(SessionPool.SessionPool, poolLayer)
      const [warmPid] = yield* heldWhen(pool, (pids) => pids.length === 1)

      const session = yield* Session.start(profile).pipe(Effect.provide(poolLayer))
      expect(session.pid).toBe(warmPid)
      expect(yield* session.initialize).toHaveProperty("commands")
      expect(yield* turnText(session, "Say hello")).toBe("Warm hello.")
      const request = yield* model.awaitRequest(0, FakeModel.isConversation)
      expect(FakeModel.messagesText(request)).toContain("Say hello")
      expect((yield* session.state.get).transcriptPath).toBeDefined()
    }).pipe(Effect.provide(Live.layer)))
})
