/**
 * A session continued on a second machine, with the real CLI and FakeModel:
 * two turns on config dir A, mirrored to Postgres at each turn's end; A is
 * deleted; the transcript is restored into an empty config dir B (the same
 * project folder, as a second machine with the same checkout has); the real
 * CLI resumes there, and the request FakeModel receives carries both turns.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { ProcessHost } from "@skein/kernel"
import { Session } from "@skein/session"
import { SqlStore, TranscriptMirror } from "@skein/sql"
import { ClaudeCli, FakeModel, Postgres } from "@skein/testkit"
import { Effect, Layer, Option, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { tempDir } from "./backings.js"

const options = (model: FakeModel.FakeModel["Type"], cwd: string, configDir: string, tmpDir: string, extra: Partial<Session.SessionOptions> = {}): Session.SessionOptions => ({
  cwd,
  configDir,
  env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir, tmpDir }),
  bare: true,
  stopTimeouts: { stdinGrace: "500 millis", termGrace: "500 millis" },
  ...extra
})

describe("restore on another machine, with the real CLI", () => {
  it.scopedLive("two turns on A mirrored to Postgres, A deleted, restored into B: the CLI on B resumes with both turns", () =>
    Effect.gen(function*() {
      const server = yield* Postgres.start()
      const url = Redacted.value(yield* server.database("restore"))
      const store = yield* SqlStore.make({ _tag: "Postgres", url: Redacted.make(url) })
      const mirror = yield* TranscriptMirror.make.pipe(Effect.provideService(SqlStore.SqlStore, store))
      const model = yield* FakeModel.make({
        replies: [FakeModel.text("Answer one."), FakeModel.text("Answer two."), FakeModel.text("Answer three.")]
      })
      const checkout = Fs.realpathSync(yield* tempDir("skein-checkout-"))
      const machineA = yield* tempDir("skein-machine-a-")
      const configA = Path.join(machineA, "config")
      const tmpA = Path.join(machineA, "tmp")
      Fs.mkdirSync(configA)
      Fs.mkdirSync(tmpA)

      const cliSessionId = yield* Effect.scoped(Effect.gen(function*() {
        const session = yield* Session.start(options(model, checkout, configA, tmpA))
        yield* session.initialize
        for (const prompt of ["first question", "second question"]) {
          yield* Effect.flatMap(session.send(prompt), (turn) => turn.result)
          // The CLI names its session with the first turn's `init`.
          const id = yield* session.sessionId
          // What skein does before it reports the turn ended.
          yield* mirror.sync({ configDir: configA, cliSessionId: id, sessionId: "ses_e2e" })
        }
        return yield* session.sessionId
      }))
      // The CLI appends its metadata at exit: the last sync takes it too.
      yield* mirror.sync({ configDir: configA, cliSessionId, sessionId: "ses_e2e" })
      const before = Fs.readdirSync(Path.join(configA, "projects"))
      const original = Fs.readFileSync(Path.join(configA, "projects", before[0]!, `${cliSessionId}.jsonl`))
      Fs.rmSync(machineA, { recursive: true, force: true })

      const machineB = yield* tempDir("skein-machine-b-")
      const configB = Path.join(machineB, "config")
      const tmpB = Path.join(machineB, "tmp")
      Fs.mkdirSync(configB)
      Fs.mkdirSync(tmpB)
      const restored = yield* mirror.restore(cliSessionId, configB)
      expect(restored.files.map((f) => f.path)).toContain(`projects/${before[0]}/${cliSessionId}.jsonl`)
      expect(Fs.readFileSync(Path.join(configB, "projects", before[0]!, `${cliSessionId}.jsonl`)).equals(original)).toBe(true)

      const resumed = yield* Session.start(options(model, checkout, configB, tmpB, { resume: cliSessionId }))
      const third = yield* Effect.flatMap(resumed.send("third question"), (turn) => turn.result)
      expect(third.text).toBe("Answer three.")
      const request = yield* model.awaitRequest(0, (r) => FakeModel.isConversation(r) && FakeModel.messagesText(r).includes("third question"))
      const body = Option.getOrThrow(request.messagesRequest)
      const text = JSON.stringify(body.messages)
      for (const earlier of ["first question", "Answer one.", "second question", "Answer two."]) expect(text).toContain(earlier)
      expect(text.indexOf("first question")).toBeLessThan(text.indexOf("second question"))
    }).pipe(Effect.provide(Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer))), { timeout: 150_000 })
})
