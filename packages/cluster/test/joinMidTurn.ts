/**
 * The set-up both tests of a runner joining mid-turn share: two socket
 * runners over a throwaway Postgres (the real CLI, FakeModel), their shards
 * settled; a session whose shard a third runner will take; a turn on it that
 * streams slowly (a chunk every 5 s) through runner A's edge, watched by an
 * SSE client on A; and the third runner started while the turn streams.
 */
import { expect } from "@effect/vitest"
import { ClaudeCli, FakeModel, Postgres } from "@skein/testkit"
import { Effect, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Processes from "./processes.js"

export interface Options {
  /** The database's name and the temp folders' prefix. */
  readonly name: string
  readonly token: string
  /** The runners' ports: a, b, and the one that joins. */
  readonly ports: readonly [number, number, number]
  /** The streaming turn's prompt; FakeModel answers it with `streamed`, slowly. */
  readonly prompt: string
  readonly streamed: string
  readonly turnDrainMillis?: number | undefined
}

export const joinMidTurn = (options: Options) =>
  Effect.gen(function*() {
    const { ports, prompt, token } = options
    const pg = yield* Postgres.start()
    const database = Redacted.value(yield* pg.database(options.name))
    const model = yield* FakeModel.make({
      fallback: (request) =>
        FakeModel.promptOf(request).includes(prompt)
          ? FakeModel.withDelay(FakeModel.text(options.streamed), "5 seconds")
          : FakeModel.text(`Answer to ${FakeModel.promptOf(request)}.`)
    })
    const shared = yield* ClaudeCli.offlineDirs(`skein-cluster-${options.name}-`)
    const cwd = Fs.realpathSync(shared.cwd)
    const configOf = (name: string, runnerPort: number) => ({
      database,
      ...Processes.runnerDirs(shared.root, name),
      cwd,
      modelUrl: model.url,
      runnerPort,
      token,
      runner: "Socket" as const,
      ...(options.turnDrainMillis === undefined ? {} : { turnDrainMillis: options.turnDrainMillis })
    })
    const a = yield* Processes.spawnRunner(configOf("a", ports[0]))
    const b = yield* Processes.spawnRunner(configOf("b", ports[1]))
    yield* Processes.awaitShardsSettled(database, [a, b])
    const cConfig = configOf("c", ports[2])

    // A session whose shard the third runner will take: its owner with a, b and c is c.
    const { hostPid, session: moving } = yield* Processes.sessionMovingTo(database, [a, b], cConfig, cwd)
    const callA = Processes.api(a.url, token)

    // The turn streams; the third runner joins meanwhile.
    const watcher = Processes.subscribe(a.url, token, cwd)
    yield* Effect.promise(() => watcher.until((f) => f.type === "server.connected", 10_000))
    const ofSession = (f: Processes.Frame) => f.properties["sessionID"] === moving.id
    yield* Effect.promise(() => callA("POST", `/session/${moving.id}/prompt_async`, { parts: [{ type: "text", text: prompt }] }))
    yield* model.awaitRequest(0, (r) => FakeModel.isConversation(r) && FakeModel.promptOf(r).includes(prompt))
    expect(yield* Processes.turnRunnerPid(database, moving.id)).toBe(hostPid)
    yield* Effect.promise(() => watcher.until((f) => f.type === "message.part.delta" && ofSession(f), 30_000))
    const c = yield* Processes.spawnRunner(cConfig)
    const joinedBeforeTheEnd = !watcher.frames.some((f) => f.type === "session.idle" && ofSession(f))
    expect(joinedBeforeTheEnd).toBe(true)
    return { database, model, a, b, c, hostPid, moving, callA, watcher, ofSession }
  })
