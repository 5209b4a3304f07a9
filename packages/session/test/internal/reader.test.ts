/**
 * The reader alone, over real child processes: every line is folded,
 * published and dispatched in order, and the leader's exit ends the reading
 * even while a descendant holds stdout open.
 */
import { describe, expect, it } from "@effect/vitest"
import { ProcessHost } from "@skein/kernel"
import { Effect, Queue } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as LazyHub from "../../src/internal/lazyHub.js"
import * as Reader from "../../src/internal/reader.js"
import * as StateCell from "../../src/internal/stateCell.js"
import * as StdoutPull from "../../src/internal/stdoutPull.js"
import { eventRecord } from "../../src/Session.js"
import * as SessionState from "../../src/SessionState.js"
import type { SessionEvent } from "../../src/Turn.js"

/** A real `system/init` line, from a capture of the CLI. */
const init = Fs.readFileSync(Path.join(import.meta.dirname, "..", "..", "..", "protocol", "test", "fixtures", "text-thinking.ndjson"), "utf8")
  .split("\n").find((line) => line.includes(`"subtype":"init"`))!
const sessionIdOf = (line: string): string => JSON.parse(line).session_id

const readShell = (script: string) =>
  Effect.gen(function*() {
    const child = yield* ProcessHost.spawn({ command: "sh", args: ["-c", script], env: { INIT: init }, stopTimeouts: { stdinGrace: "100 millis", termGrace: "100 millis" } })
    const state = yield* StateCell.make(SessionState.initial({ cwd: "/tmp" }))
    const events = LazyHub.make<SessionEvent>()
    const bus = yield* events.subscribe
    const dispatched: Array<string> = []
    const status = yield* Reader.run({
      child,
      stdout: StdoutPull.decoded(child.pullStdout),
      state,
      events,
      record: eventRecord,
      dispatch: (events) => Effect.sync(() => dispatched.push(...events.map((event) => event._tag))),
      drainGrace: "300 millis"
    })
    return { status, dispatched, published: yield* Queue.takeAll(bus), state: yield* state.get, child }
  })

describe("reader", () => {
  it.scopedLive("folds, publishes and dispatches each line in order, diagnostics included, then reports the exit", () =>
    Effect.gen(function*() {
      const { dispatched, published, state, status } = yield* readShell(`printf '%s\\n' "$INIT" 'not json' '{"type":"future_type"}'; exit 4`)
      expect(status.code).toBe(4)
      expect(dispatched).toEqual(["Message", "Unparseable", "Unknown"])
      expect([...published].map((e) => e._tag)).toEqual(dispatched)
      expect(state.sessionId).toBe(sessionIdOf(init))
      expect(state.status).toBe("exited")
    }).pipe(Effect.provide(ProcessHost.layerMemory())))

  it.scopedLive("a last line without a newline still counts, and a read split mid-line is joined", () =>
    Effect.gen(function*() {
      const { dispatched, state } = yield* readShell(
        `printf '%s' "$INIT" | head -c 100; sleep 0.2; printf '%s\n' "$INIT" | tail -c +101; printf '{"type":"future_type"}'`
      )
      expect(dispatched).toEqual(["Message", "Unknown"])
      expect(state.sessionId).toBe(sessionIdOf(init))
    }).pipe(Effect.provide(ProcessHost.layerMemory())))

  it.scopedLive("failure 2: a descendant holding stdout does not hold the reader past the leader's exit", () =>
    Effect.gen(function*() {
      const { child, dispatched, status } = yield* readShell(`printf '%s\\n' "$INIT"; sleep 30 & sleep 0.3; exit 3`).pipe(
        Effect.timeout("8 seconds")
      )
      expect(status.code).toBe(3)
      // What the leader printed before it exited was still read.
      expect(dispatched).toEqual(["Message"])
      expect(yield* child.isRunning).toBe(false)
    }).pipe(Effect.provide(ProcessHost.layerMemory())))
})
