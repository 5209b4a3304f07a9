/**
 * Skein.layer with the real CLI against FakeModel: one `Effect.provide`
 * serves a session, its forked worker and the session registry, and the
 * journal, task records and event log land under the state folder.
 */
import { describe, expect, it } from "@effect/vitest"
import { ProcessJournal } from "@skein/kernel"
import { SessionRegistry } from "@skein/serve"
import { Permissions, Session, Worker } from "@skein/session"
import { SessionIndex } from "@skein/store"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { ConfigProvider, Effect, Fiber, FiberRef, Layer } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Skein from "../src/Skein.js"

describe("Skein.layer", () => {
  it.scopedLive("one provide runs a session, answers its permission ask, forks a worker and serves the registry", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({
        // In order: the parent's tool call and its answer, the worker's, the registry session's.
        replies: [
          FakeModel.toolUse("Bash", { command: "echo hi > made.txt" }),
          FakeModel.text("Made it."),
          FakeModel.text("Worker: one file."),
          FakeModel.text("Registry hello.")
        ]
      })
      const d = yield* ClaudeCli.offlineDirs("skein-runtime-")
      const stateDir = Path.join(d.root, "state")
      const launch: Session.SessionOptions = {
        cwd: d.cwd,
        configDir: d.configDir,
        env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: d.configDir, tmpDir: d.tmpDir }),
        bare: true
      }
      const asked: Array<string> = []
      const permissions = Permissions.layer((request) => {
        asked.push(request.toolName)
        return Effect.succeed(Permissions.allow())
      })
      const skein = Skein.layer({
        configDir: d.configDir,
        stateDir,
        session: { env: launch.env, bare: true },
        stopTimeouts: { stdinGrace: "500 millis", termGrace: "500 millis" }
      })

      const program = Effect.gen(function*() {
        const session = yield* Session.start(launch)
        const summary = yield* Effect.flatMap(session.send("Make the file"), (turn) => turn.result)
        const workers = yield* Worker.pool(session, { launch })
        const worker = yield* Worker.fork(workers, { label: "counter", prompt: "Count the files" })
        const result = yield* worker.result
        const journal = yield* ProcessJournal.ProcessJournal
        const liveEntries = (yield* journal.entries).length

        const registry = yield* SessionRegistry.SessionRegistry
        const served = yield* registry.create({ directory: d.cwd, title: "served" })
        const reply = yield* registry.prompt(served.id, "Say hello")

        const index = yield* SessionIndex.SessionIndex
        const listed = yield* index.list({ cwd: d.cwd })
        const where = yield* Skein.Skein
        return { summary, result, liveEntries, reply, listed, where, sessionId: yield* session.sessionId }
      }).pipe(Effect.scoped, Effect.provide(Layer.merge(skein, permissions)))

      const out = yield* program
      expect(out.summary.text).toBe("Made it.")
      expect(asked).toEqual(["Bash"])
      expect(Fs.readFileSync(Path.join(d.cwd, "made.txt"), "utf8").trim()).toBe("hi")
      expect(out.result.text).toBe("Worker: one file.")
      expect(out.result.parentSessionId).toBe(out.sessionId)
      // The parent's CLI was still running, and recorded in the journal file.
      expect(out.liveEntries).toBeGreaterThan(0)
      expect(out.reply.parts.flatMap((p) => (p.type === "text" ? [p.text] : []))).toEqual(["Registry hello."])
      expect(out.listed.map((s) => s.sessionId)).toContain(out.sessionId)
      expect(out.where).toEqual({ configDir: d.configDir, stateDir, journal: Path.join(stateDir, "processes.json") })
      expect(Fs.existsSync(out.where.journal)).toBe(true)
      expect(Fs.readdirSync(Path.join(stateDir, "tasks")).length).toBeGreaterThan(0)
      expect(Fs.readdirSync(Path.join(stateDir, "serve", "events")).length).toBeGreaterThan(0)
    }))

  it.effect("layerConfig takes its folders from CLAUDE_CONFIG_DIR and SKEIN_ROOT, with defaults", () =>
    Effect.gen(function*() {
      const read = (env: ReadonlyArray<readonly [string, string]>) =>
        Effect.withConfigProvider(Skein.config, ConfigProvider.fromMap(new Map(env)))
      const both = yield* read([["CLAUDE_CONFIG_DIR", "/srv/claude"], ["SKEIN_ROOT", "/srv/skein"]])
      expect(Skein.paths(both)).toEqual({ configDir: "/srv/claude", stateDir: "/srv/skein", journal: "/srv/skein/processes.json" })
      const configOnly = yield* read([["CLAUDE_CONFIG_DIR", "/srv/claude"]])
      expect(Skein.paths(configOnly).stateDir).toBe("/srv/claude/skein")
      const neither = yield* read([])
      expect(Skein.paths(neither).configDir).toMatch(/\/\.claude$/)
    }))

  it.scoped("layerConfig builds the whole layer from the environment alone", () =>
    Effect.gen(function*() {
      const d = yield* ClaudeCli.offlineDirs("skein-runtime-config-")
      const env = new Map([["CLAUDE_CONFIG_DIR", d.configDir], ["SKEIN_ROOT", Path.join(d.root, "state")]])
      const where = yield* Skein.Skein.pipe(
        Effect.provide(Skein.layerConfig().pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(env)))))
      )
      expect(where).toEqual(Skein.paths({ configDir: d.configDir, stateDir: Path.join(d.root, "state") }))
      // The effect it is provided to runs on the sliced scheduler, unless told otherwise. Each is
      // read in a fiber of its own: a merged layer's scoped FiberRef outlives its provide in the fiber
      // that provided it.
      const provided = Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(env)))
      const schedulerUnder = <A, E>(layer: Layer.Layer<A, E>) =>
        FiberRef.get(FiberRef.currentScheduler).pipe(Effect.provide(layer), Effect.fork, Effect.flatMap(Fiber.await), Effect.flatten)
      const outside = yield* Effect.fork(FiberRef.get(FiberRef.currentScheduler)).pipe(Effect.flatMap(Fiber.await), Effect.flatten)
      expect(yield* schedulerUnder(Skein.layerConfig({ scheduler: false }).pipe(provided))).toBe(outside)
      const sliced = yield* schedulerUnder(Skein.layerConfig().pipe(provided))
      expect(sliced).not.toBe(outside)
      expect(sliced.constructor.name).toBe("SlicedScheduler")
      // The task store opened its folder under the state root.
      expect(Fs.existsSync(Path.join(where.stateDir, "tasks"))).toBe(true)
    }))
})
