/**
 * A pipeline: review every file of a small folder (this repository's
 * packages/pipeline/src) with a typed verdict, then one summary over all the
 * verdicts.
 *
 *   npx tsx examples/pipeline.ts                      # offline, with an embedded FakeModel
 *   skein pipeline run examples/pipeline.ts --fake-model --budget 0.5
 *
 * Each file is one turn of a fresh Claude Code session, four at a time; its
 * answer is the turn's structured output (`--json-schema`), decoded as
 * `{file, risk: "low" | "high", notes}`. The summary stage gets every
 * verdict, in the folder's order, and answers `{high, text}`.
 *
 * Offline and hermetic when run directly: the real CLI talks only to an
 * embedded FakeModel on 127.0.0.1 (which calls a file high risk when it
 * parses JSON by hand), with a private config folder, working directory and
 * TMPDIR. Closing the scope stops every process and removes the folders.
 */
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { define } from "@skein/cli/Pipeline"
import { ProcessHost } from "@skein/kernel"
import { Launch, Pipeline, Run, Stage } from "@skein/pipeline"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Console, Effect, Layer, Schema } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const folder = Path.resolve(import.meta.dirname, "..", "packages", "pipeline", "src")

interface File {
  readonly file: string
  readonly content: string
}

const files: ReadonlyArray<File> = Fs.readdirSync(folder).filter((name) => name.endsWith(".ts")).sort().map((name) => ({
  file: name,
  content: Fs.readFileSync(Path.join(folder, name), "utf8")
}))

const Verdict = Schema.Struct({ file: Schema.String, risk: Schema.Literal("low", "high"), notes: Schema.String })
type Verdict = typeof Verdict.Type
const Summary = Schema.Struct({ high: Schema.Array(Schema.String), text: Schema.String })

const review = Stage.make({
  name: "review",
  prompt: (f: File) => `Review the file ${f.file} for risk. Answer low or high, with a short note.\n\n${f.content}`,
  outputSchema: Verdict
})

const summary = Stage.make({
  name: "summary",
  prompt: (verdicts: ReadonlyArray<Verdict>) => `Summarize these review verdicts in one sentence:\n${JSON.stringify(verdicts)}`,
  outputSchema: Summary
})

export const pipeline = Pipeline.from<File>().pipe(
  Pipeline.through(review, { concurrency: 4 }),
  Pipeline.gather(summary)
)

// --- the fake model's side: answers through the StructuredOutput tool ----------

const lastUserText = FakeModel.promptOf

const decodeVerdicts = Schema.decodeUnknownSync(Schema.parseJson(Schema.Array(Verdict)))

export const fakeModel = (request: FakeModel.RecordedRequest): FakeModel.Reply => {
  if (!FakeModel.isConversation(request)) return FakeModel.text("OK.")
  const prompt = lastUserText(request)
  const reviewed = /^Review the file (\S+) for risk/.exec(prompt)
  if (reviewed !== null) {
    const high = prompt.includes("JSON.parse(")
    return FakeModel.toolUse("StructuredOutput", {
      file: reviewed[1],
      risk: high ? "high" : "low",
      notes: high ? "parses JSON by hand: check what it trusts" : "nothing risky found"
    })
  }
  if (prompt.startsWith("Summarize these review verdicts")) {
    const verdicts = decodeVerdicts(prompt.slice(prompt.indexOf("\n") + 1))
    const high = verdicts.filter((v) => v.risk === "high").map((v) => v.file)
    return FakeModel.toolUse("StructuredOutput", { high, text: `${verdicts.length} files reviewed, ${high.length} high risk.` })
  }
  return FakeModel.text("I review files.")
}

/** For `skein pipeline run examples/pipeline.ts`. */
export default define({ pipeline, inputs: files, fakeModel })

// --- run directly: offline, against an embedded FakeModel ----------------------

const main = Effect.gen(function*() {
  const model = yield* FakeModel.make({ fallback: fakeModel })
  const d = yield* ClaudeCli.offlineDirs("skein-pipeline-example-")
  const launch = Launch.layer({
    cwd: d.cwd,
    configDir: d.configDir,
    env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: d.configDir, tmpDir: d.tmpDir }),
    bare: true,
    stopTimeouts: { stdinGrace: "500 millis", termGrace: "500 millis" }
  })
  const result = yield* Run.collect(pipeline, files, { budget: { usd: 1 } }).pipe(Effect.provide(launch))
  for (const { output, items } of result.outputs) {
    for (const verdict of items) yield* Console.log(`${verdict.risk.padEnd(4)} ${verdict.file}: ${verdict.notes}`)
    yield* Console.log(`\nsummary: ${output.text} high: ${output.high.join(", ") || "none"}`)
  }
  const s = result.summary
  yield* Console.log(`run ${result.runId}: ${s.done} results, ${s.failed} failed, $${s.spent.usd.toFixed(4)} spent, ${s.spent.tokens} tokens`)
})

if (process.argv[1] !== undefined && Path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main.pipe(
    Effect.scoped,
    Effect.provide(Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer)),
    NodeRuntime.runMain
  )
}
