import { describe, expect, it } from "@effect/vitest"
import { Skein } from "@skein/runtime"
import { ServerEvents } from "@skein/serve"
import { Effect, Layer } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

const temp = (prefix: string) =>
  Effect.acquireRelease(
    Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), prefix))),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )

describe("Skein.layer with --store", () => {
  it.scopedLive("sqlite: the registry's event log is rows, continued by a server on another config dir", () =>
    Effect.gen(function*() {
      const db = Path.join(yield* temp("skein-store-"), "state.db")
      const machineA = yield* temp("skein-a-")
      const machineB = yield* temp("skein-b-")
      const publish = (configDir: string) =>
        Effect.gen(function*() {
          const events = yield* ServerEvents.ServerEvents
          const records = yield* events.publish("/w", [{ type: "session.idle", properties: { sessionID: "ses_1" } }])
          return records.map((r) => r.seq)
        }).pipe(Effect.provide(Layer.orDie(Skein.layer({ configDir, store: `sqlite:${db}`, scheduler: false }))), Effect.scoped)
      expect(yield* publish(machineA)).toEqual([1])
      expect(yield* publish(machineB)).toEqual([2])
      // No segment files: the log lives in the store.
      expect(Fs.existsSync(Path.join(machineA, "skein", "serve", "events"))).toBe(false)
    }))

  it.effect("a --store that is not sqlite: or postgres:// fails the layer, typed", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Layer.build(Skein.layer({ configDir: Os.tmpdir(), store: "mysql://x", scheduler: false })).pipe(Effect.scoped))
      expect(error._tag).toBe("BadStoreUrl")
    }))
})
