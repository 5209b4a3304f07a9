/**
 * testkit's stand-in CLI (the shell script bench/scale runs a thousand of)
 * driven by the real session: `initialize` answered, two turns, every line a
 * known message, and no process left once the scope closes.
 */
import { describe, expect, it } from "@effect/vitest"
import { ProcessHost } from "@skein/kernel"
import { StandInCli } from "@skein/testkit"
import { Chunk, Effect, Exit, Queue, Scope } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Session from "../src/Session.js"

const host = ProcessHost.layerMemory()

const tempDir = Effect.acquireRelease(
  Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-stand-in-"))),
  (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

describe("StandInCli", () => {
  it.scopedLive("the session drives it through initialize and two turns, and closing leaves no process", () =>
    Effect.gen(function*() {
      const cwd = yield* tempDir
      const cli = StandInCli.command({ text: "canned" })
      const scope = yield* Scope.make()
      const session = yield* Session.start({
        cwd,
        executable: cli.command,
        executableArgs: cli.args,
        stopTimeouts: { stdinGrace: "2 seconds", termGrace: "1 second" }
      }).pipe(Scope.extend(scope))
      const bus = yield* session.subscribe.pipe(Scope.extend(scope))

      const init = yield* session.initialize
      expect(init?.["commands"]).toEqual([{ name: "compact", description: "Clear history but keep a summary", argumentHint: "" }])

      const first = yield* Effect.flatMap(session.send("one"), (turn) => turn.result)
      const second = yield* Effect.flatMap(session.send("two"), (turn) => turn.result)
      for (const summary of [first, second]) {
        expect(summary.text).toBe("canned")
        expect(summary.endReason).toBe("idle")
        expect(summary.results).toHaveLength(1)
      }
      const sessionId = yield* session.sessionId
      expect((yield* session.state.get).status).toBe("idle")

      const events = Chunk.toReadonlyArray(yield* Queue.takeAll(bus))
      // initialize's answer, init once, then running, assistant, result, idle per turn.
      expect(events.map((e) => e._tag === "Message" ? e.message.type : e._tag)).toEqual([
        "control_response",
        "system",
        ...["system", "assistant", "result", "system"],
        ...["system", "assistant", "result", "system"]
      ])
      const stamped = events.flatMap((e) => e._tag === "Message" && "session_id" in e.message ? [e.message.session_id] : [])
      expect(stamped).toEqual(Array.from({ length: 9 }, () => sessionId))
      expect(events.filter((e) => e._tag === "Message" && e.message.type === "system" && e.message.subtype === "init"))
        .toHaveLength(1)

      yield* Scope.close(scope, Exit.void)
      expect(yield* session.exit).toMatchObject({ code: 0 })
      expect(ProcessHost.isAlive(session.pid)).toBe(false)
    }).pipe(Effect.provide(host)))

  it.scopedLive("an initialize that carries nothing is written only once its answer is asked for, and then once", () =>
    Effect.gen(function*() {
      const cwd = yield* tempDir
      const cli = StandInCli.command({ text: "canned" })
      const session = yield* Session.start({ cwd, executable: cli.command, executableArgs: cli.args })
      const bus = yield* session.subscribe
      const types = Effect.map(Queue.takeAll(bus), (events) =>
        Chunk.toReadonlyArray(events).map((e) => e._tag === "Message" ? e.message.type : e._tag))

      expect((yield* Effect.flatMap(session.send("one"), (turn) => turn.result)).text).toBe("canned")
      expect(yield* types).toEqual(["system", "system", "assistant", "result", "system"])

      const init = yield* session.initialize
      expect(init?.["commands"]).toEqual([{ name: "compact", description: "Clear history but keep a summary", argumentHint: "" }])
      expect(yield* session.initialize).toBe(init)
      expect(yield* types).toEqual(["control_response"])
    }).pipe(Effect.provide(host)))
})
