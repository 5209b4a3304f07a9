/**
 * The registry's edges with the real CLI and FakeModel: a prompt interrupted
 * while its session starts, a prompt to an unknown id, an event log that
 * refuses a write, and a CLI that goes silent mid-turn.
 */
import { describe, expect, it } from "@effect/vitest"
import { FakeModel } from "@skein/testkit"
import { Effect, Fiber } from "effect"
import * as Fs from "node:fs"
import * as Harness from "./harness.js"

/** Filler the CLI keeps in its own transcripts: 4,000 snapshot lines of 10 KB, so that loading the transcript takes a while. */
const inflate = (path: string) => {
  const line = JSON.stringify({
    type: "file-history-snapshot",
    messageId: crypto.randomUUID(),
    snapshot: { messageId: crypto.randomUUID(), trackedFileBackups: {}, timestamp: new Date().toISOString(), note: "x".repeat(10_000) },
    isSnapshotUpdate: false
  })
  Fs.appendFileSync(path, `${line}\n`.repeat(4000))
}

const transcriptOf = (dir: string, cliSessionId: string): string => {
  const projects = `${dir}/projects`
  for (const project of Fs.readdirSync(projects)) {
    const file = `${projects}/${project}/${cliSessionId}.jsonl`
    if (Fs.existsSync(file)) return file
  }
  throw new Error(`no transcript for ${cliSessionId}`)
}

describe("the session registry's edges with the real CLI", () => {
  it.scopedLive("a prompt interrupted while its session starts leaves the session usable; an unknown id leaves nothing", () =>
    Effect.gen(function*() {
      const model = yield* FakeModel.make({ replies: [FakeModel.text("First."), FakeModel.text("After the interruption.")] })
      const server = yield* Harness.start(model)
      const created = yield* server.registry.create({ directory: server.dirs.cwd })
      yield* server.registry.prompt(created.id, "one")
      yield* server.registry.stop(created.id)
      inflate(transcriptOf(server.dirs.configDir, created.cliSessionId))

      // The client goes away while the 40 MB transcript loads for the resume.
      const interrupted = yield* Effect.fork(server.registry.prompt(created.id, "lost"))
      yield* Effect.sleep("150 millis")
      yield* Fiber.interrupt(interrupted)

      // Every later call on the session is answered (before: each waited forever on a start that never ended).
      expect(yield* server.registry.abort(created.id).pipe(Effect.timeout("60 seconds"))).toBe(true)
      const reply = yield* server.registry.prompt(created.id, "two").pipe(Effect.timeout("120 seconds"))
      expect(reply.parts.flatMap((p) => (p.type === "text" ? [p.text] : []))).toContain("After the interruption.")

      // Twice: the first left a slot behind, on which the second waited forever.
      for (const _ of [1, 2]) {
        const unknown = yield* Effect.flip(server.registry.prompt("ses_unknown", "hello")).pipe(Effect.timeout("30 seconds"))
        expect(unknown._tag).toBe("SessionNotFound")
      }
      expect(yield* server.registry.running).toEqual([created.id])
      yield* server.registry.stop(created.id)
      expect(yield* server.registry.running).toEqual([])
    }), 240_000)
})
