/**
 * The pool's warm-up on the real CLI, on the pinned release and on the old
 * one the cross-release tests use: the held process is warmed with no model
 * request and nothing written to the transcript, and the session that takes
 * it runs its first turn as usual. On the old release (which knows none of
 * the requests: it answers each with an error, or not at all) the warm-up
 * must not break the session either.
 */
import { describe, expect, it } from "@effect/vitest"
import type { Control } from "@skein/protocol"
import { CliRelease, FakeModel } from "@skein/testkit"
import { Context, Effect, Layer, Stream } from "effect"
import * as Session from "../src/Session.js"
import * as SessionPool from "../src/SessionPool.js"
import * as Live from "./live.js"

const releases = [
  { name: "pinned CLI 2.1.332", options: Effect.succeed({}), bare: true },
  {
    name: `old CLI ${CliRelease.defaultVersion}`,
    options: Effect.map(CliRelease.install(), (release) => ({ executable: release.command, executableArgs: release.args })),
    bare: false
  }
] as const

/** The recommended warm-up, and one request that no release before 2.1.3xx knows. */
const warmup: ReadonlyArray<Control.HostRequestPayload> = [...SessionPool.warmup, { subtype: "prompt_draft_activity" }]

for (const release of releases) {
  describe(`SessionPool warm-up: ${release.name}`, () => {
    it.scopedLive("warms the held process with no model request and no transcript; its session runs as usual", () =>
      Effect.gen(function*() {
        const model = yield* FakeModel.make({ replies: [FakeModel.text("Warm hello.")] })
        const d = yield* Live.dirs
        const profile = Live.liveOptions(model, d, { ...(yield* release.options), bare: release.bare })
        const context = yield* Layer.buildWithScope(
          SessionPool.layer({ profiles: [profile], size: 1, warmup }),
          yield* Effect.scope
        )
        const pool = Context.get(context, SessionPool.SessionPool)
        const [warmPid] = yield* pool.held.changes.pipe(Stream.filter((pids) => pids.length === 1), Stream.runHead, Effect.flatten)

        // Held and warmed: the model saw no Messages request (the warm-up only counts tokens), and no
        // transcript holds a user entry. (The
        // 2.0 line sends requests of its own at launch, prompt "Warmup", to warm its subagents' cache,
        // and records them in sidechains, with or without a pool: those are not the warm-up's.)
        const messages = (yield* model.requests).filter((request) =>
          request.path === "/v1/messages" && FakeModel.promptOf(request) !== "Warmup"
        )
        expect(messages).toEqual([])
        expect(Live.transcripts(d.configDir).flatMap(Live.userPrompts)).toEqual([])

        const session = yield* Session.start(profile).pipe(Effect.provide(Layer.succeedContext(context)))
        expect(session.pid).toBe(warmPid)
        const turn = yield* session.send("Say hello")
        expect((yield* turn.result).text).toBe("Warm hello.")
        const first = yield* model.awaitRequest(0, FakeModel.isConversation)
        expect(FakeModel.promptOf(first)).toContain("Say hello")

        // The transcript holds the turn, and nothing the warm-up did.
        expect(Live.transcripts(d.configDir).flatMap(Live.userPrompts)).toEqual(["Say hello"])
        yield* session.end
      }).pipe(Effect.provide(Live.layer)), 150_000)
  })
}
