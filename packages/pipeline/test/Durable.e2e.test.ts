/**
 * End-to-end: a durable run (sqlite journal) whose process is SIGKILLed
 * after about half its items, started again under the same run id. The
 * items done before the kill are not sent to the model again, and the
 * outputs equal an uninterrupted run's.
 */
import { describe, expect, it } from "@effect/vitest"
import { ClaudeCli, FakeModel, TsChild } from "@skein/testkit"
import { Duration, Effect, Schema } from "effect"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import { Pipeline, Run, RunEvent } from "../src/index.js"
import * as Support from "./support.js"

const fixture = Path.join(import.meta.dirname, "fixtures", "durableRun.ts")
const decodeEvent = Schema.decodeUnknownSync(Schema.parseJson(RunEvent.RunEvent))

interface Ran {
  readonly events: ReadonlyArray<RunEvent.RunEvent>
  readonly outputs: unknown
  readonly signal: string | null
}

/** Runs the fixture; with `killAfterDone`, SIGKILLs it once that many items are done. */
const runChild = (env: Record<string, string>, killAfterDone?: number) =>
  Effect.async<Ran>((resume) => {
    const child = ChildProcess.spawn(process.execPath, [...TsChild.nodeArgs(fixture, "tsx")], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "inherit"]
    })
    const events: Array<RunEvent.RunEvent> = []
    let outputs: unknown = undefined
    let buffer = ""
    child.stdout.setEncoding("utf8").on("data", (text: string) => {
      buffer += text
      const lines = buffer.split("\n")
      buffer = lines.pop() ?? ""
      for (const line of lines) {
        if (line.startsWith("{\"_tag\":\"Result\"")) outputs = JSON.parse(line).outputs
        else if (line.trim().length > 0) events.push(decodeEvent(line))
      }
      if (killAfterDone !== undefined && events.filter((e) => e._tag === "ItemDone").length >= killAfterDone) child.kill("SIGKILL")
    })
    child.once("close", (_code, signal) => resume(Effect.succeed({ events, outputs, signal })))
    return Effect.sync(() => child.kill("SIGKILL"))
  })

const reviews = Pipeline.from<Support.File>().pipe(Pipeline.through(Support.review, { concurrency: 2 }))

describe("a durable run with the real CLI", () => {
  it.scopedLive("SIGKILLed after half its items and run again under its id: done items are not sent again, outputs equal an uninterrupted run's", () =>
    Effect.gen(function*() {
      const delay = () => Duration.millis(300)
      const model = yield* FakeModel.make({ fallback: Support.answer({ delay }) })
      const d = yield* ClaudeCli.offlineDirs("skein-pipeline-durable-")
      const env = {
        SKEIN_TEST_MODEL_URL: model.url,
        SKEIN_TEST_DIRS: JSON.stringify(d),
        SKEIN_TEST_DB: Path.join(d.root, "journal.db"),
        SKEIN_TEST_RUN_ID: "durable-run-1"
      }
      const first = yield* runChild(env, 6)
      expect(first.signal).toBe("SIGKILL")
      expect(first.outputs).toBeUndefined()
      const doneFirst = first.events.flatMap((e) => e._tag === "ItemDone" ? [e.index] : [])
      expect(doneFirst.length).toBeGreaterThanOrEqual(6)
      expect(doneFirst.length).toBeLessThan(12)

      const second = yield* runChild(env)
      expect(second.signal).toBeNull()
      const recorded = second.events.flatMap((e) => e._tag === "ItemDone" && e.recorded ? [e.index] : [])
      expect(recorded.toSorted()).toEqual(doneFirst.toSorted())

      // Each item done before the kill reached the model once, in the first run only.
      const files = Support.files(12)
      const requests = yield* model.requests
      for (const i of doneFirst) expect(Support.requestsFor(requests, Support.reviewPrompt(files[i]!))).toBe(1)
      for (const file of files) expect(Support.requestsFor(requests, Support.reviewPrompt(file))).toBeGreaterThanOrEqual(1)

      // The same run, uninterrupted, in this process and against a model of its own.
      const other = yield* FakeModel.make({ fallback: Support.answer() })
      const d2 = yield* ClaudeCli.offlineDirs("skein-pipeline-durable-")
      const whole = yield* Run.collect(reviews, files).pipe(Effect.provide(Support.launch(other, d2)))
      expect(second.outputs).toEqual(whole.outputs)
      expect(Support.clisUnder(d.configDir)).toEqual([])
    }).pipe(Effect.provide(Support.layer)), 180_000)
})
