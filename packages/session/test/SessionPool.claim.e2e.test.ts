/**
 * The pool's parked spares (`claim`) on the real CLI: a spare started with
 * `--await-claim` and claimed when a session takes it runs that session's
 * first turn under the session id it was launched with, records its
 * transcript there, and the session resumes from it; a spare never claimed
 * leaves no transcript and no process once the pool closes. On the old
 * release the cross-release tests use (which does not know the flag), the
 * pool keeps spares as without the option and the session runs as usual.
 */
import { describe, expect, it } from "@effect/vitest"
import { CliRelease, FakeModel } from "@skein/testkit"
import { Context, Effect, Exit, Layer, Scope, Stream } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Paths from "../src/internal/paths.js"
import * as Session from "../src/Session.js"
import * as SessionPool from "../src/SessionPool.js"
import * as Live from "./live.js"

/** Whether the process was started as a parked spare. */
const parked = (pid: number): boolean => Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").includes("--await-claim")

/** The pids the pool holds once it holds `n`. */
const heldPids = (pool: SessionPool.SessionPool["Type"], n: number) =>
  pool.held.changes.pipe(Stream.filter((pids) => pids.length === n), Stream.runHead, Effect.flatten)

/** Conversation requests, not the 2.0 line's own "Warmup" requests at launch. */
const conversations = (model: FakeModel.FakeModel["Type"]) =>
  Effect.map(model.requests, (requests) =>
    requests.filter((request) => request.path === "/v1/messages" && FakeModel.promptOf(request) !== "Warmup"))

describe("SessionPool claim: pinned CLI 2.1.332", () => {
  it.scopedLive("a claimed spare answers in its own session, whose transcript it writes and which resumes", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.text("Claimed hello."), FakeModel.text("Resumed hello.")] })
      const d = yield* Live.dirs
      const profile = Live.liveOptions(model, d)
      const context = yield* Layer.buildWithScope(SessionPool.layer({ profiles: [profile], size: 1, claim: true }), yield* Effect.scope)
      const pool = Context.get(context, SessionPool.SessionPool)
      const [sparePid] = yield* heldPids(pool, 1)
      expect(parked(sparePid!)).toBe(true)

      // Parked: no model request, no transcript.
      expect(yield* conversations(model)).toEqual([])
      expect(Live.transcripts(d.configDir)).toEqual([])

      const sessionId = yield* Effect.scoped(Effect.gen(function*() {
        const session = yield* Session.start(profile).pipe(Effect.provide(Layer.succeedContext(context)))
        expect(session.pid).toBe(sparePid)
        const turn = yield* session.send("Say hello")
        expect((yield* turn.result).text).toBe("Claimed hello.")
        const id = yield* session.sessionId
        yield* session.end
        yield* session.exit
        return id
      }))

      // The turn is in the transcript of the session's own id, in its cwd's project folder, and nowhere else.
      const file = Paths.transcriptPath(d.configDir, d.cwd, sessionId)
      expect(Live.transcripts(d.configDir).map((f) => Fs.realpathSync(f))).toContain(Fs.realpathSync(file))
      expect(Live.transcripts(d.configDir).flatMap(Live.userPrompts)).toEqual(["Say hello"])

      // Resumable: a cold `--resume` of that id sends the first turn as history.
      const resumed = yield* Session.start({ ...profile, resume: sessionId })
      const again = yield* resumed.send("Say hello again")
      expect((yield* again.result).text).toBe("Resumed hello.")
      expect(yield* resumed.sessionId).toBe(sessionId)
      const second = yield* model.awaitRequest(1, FakeModel.isConversation)
      expect(JSON.stringify(second.body)).toContain("Say hello")
      expect(Live.userPrompts(file)).toEqual(["Say hello", "Say hello again"])
      yield* resumed.end
    }).pipe(Effect.provide(Live.layer)), 150_000)

  it.scopedLive("a parked spare serves a session in another folder: the claim moves it there", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.text("Hello from elsewhere.")] })
      const d = yield* Live.dirs
      const profile = Live.liveOptions(model, d)
      const elsewhere = Path.join(d.tmpDir, "elsewhere")
      Fs.mkdirSync(elsewhere)
      const context = yield* Layer.buildWithScope(SessionPool.layer({ profiles: [profile], size: 1, claim: true }), yield* Effect.scope)
      const [sparePid] = yield* heldPids(Context.get(context, SessionPool.SessionPool), 1)

      const session = yield* Session.start({ ...profile, cwd: elsewhere }).pipe(Effect.provide(Layer.succeedContext(context)))
      expect(session.pid).toBe(sparePid)
      const turn = yield* session.send("Say hello")
      expect((yield* turn.result).text).toBe("Hello from elsewhere.")
      // The model was told the session's folder, and the transcript is in that folder's project.
      const request = yield* model.awaitRequest(0, FakeModel.isConversation)
      expect(JSON.stringify(request.body)).toContain(Fs.realpathSync(elsewhere))
      const file = Paths.transcriptPath(d.configDir, Fs.realpathSync(elsewhere), yield* session.sessionId)
      expect(Live.userPrompts(file)).toEqual(["Say hello"])
      expect(Live.transcripts(d.configDir).flatMap(Live.userPrompts)).toEqual(["Say hello"])
      yield* session.end
    }).pipe(Effect.provide(Live.layer)), 150_000)

  it.scopedLive("an unclaimed spare leaves no transcript and no process when the pool closes", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [] })
      const d = yield* Live.dirs
      const profile = Live.liveOptions(model, d)
      const poolScope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(SessionPool.layer({ profiles: [profile], size: 2, claim: true }), poolScope)
      const pids = yield* heldPids(Context.get(context, SessionPool.SessionPool), 2)
      expect(pids.every(Live.alive) && pids.every(parked)).toBe(true)

      yield* Scope.close(poolScope, Exit.void)
      expect(pids.filter(Live.alive)).toEqual([])
      expect(Live.transcripts(d.configDir)).toEqual([])
      expect(yield* conversations(model)).toEqual([])
    }).pipe(Effect.provide(Live.layer)), 150_000)

  it.scopedLive("a refused claim stops the spare, and the session starts cold", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.text("Cold hello.")] })
      const d = yield* Live.dirs
      // Not bare: the claim reads the project's settings, which bare leaves out.
      const profile = Live.liveOptions(model, d, { bare: false })
      const context = yield* Layer.buildWithScope(SessionPool.layer({ profiles: [profile], size: 1, claim: true }), yield* Effect.scope)
      const [sparePid] = yield* heldPids(Context.get(context, SessionPool.SessionPool), 1)
      expect(parked(sparePid!)).toBe(true)

      // Settings a parked spare cannot apply (a project `env`) appear in the cwd while it waits: the claim is refused.
      Fs.mkdirSync(Path.join(d.cwd, ".claude"))
      Fs.writeFileSync(Path.join(d.cwd, ".claude", "settings.json"), JSON.stringify({ env: { SKEIN_CLAIM_TEST: "1" } }))

      const session = yield* Session.start(profile).pipe(Effect.provide(Layer.succeedContext(context)))
      expect(session.pid).not.toBe(sparePid)
      expect(parked(session.pid)).toBe(false)
      const turn = yield* session.send("Say hello")
      expect((yield* turn.result).text).toBe("Cold hello.")
      expect(Live.alive(sparePid!)).toBe(false)
      expect(Live.transcripts(d.configDir).flatMap(Live.userPrompts)).toEqual(["Say hello"])
      yield* session.end
    }).pipe(Effect.provide(Live.layer)), 150_000)
})

describe(`SessionPool claim: old CLI ${CliRelease.defaultVersion}`, () => {
  it.scopedLive("a CLI without --await-claim keeps spares unparked, and the session runs on one", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.text("Old hello.")] })
      const d = yield* Live.dirs
      const release = yield* CliRelease.install()
      const profile = Live.liveOptions(model, d, { executable: release.command, executableArgs: release.args, bare: false })
      const context = yield* Layer.buildWithScope(SessionPool.layer({ profiles: [profile], size: 1, claim: true }), yield* Effect.scope)
      const [sparePid] = yield* heldPids(Context.get(context, SessionPool.SessionPool), 1)
      expect(parked(sparePid!)).toBe(false)

      const session = yield* Session.start(profile).pipe(Effect.provide(Layer.succeedContext(context)))
      expect(session.pid).toBe(sparePid)
      const turn = yield* session.send("Say hello")
      expect((yield* turn.result).text).toBe("Old hello.")
      expect(Live.transcripts(d.configDir).flatMap(Live.userPrompts)).toEqual(["Say hello"])
      yield* session.end
    }).pipe(Effect.provide(Live.layer)), 150_000)
})
