/**
 * The review pipeline the tests run with the real CLI against FakeModel:
 * a verdict per file (`{file, risk, notes}`), then one summary over them.
 * FakeModel answers by the prompt it is sent, so replies reach the right
 * session whatever the order the concurrent sessions ask in.
 */
import { NodeContext } from "@effect/platform-node"
import { ProcessHost } from "@skein/kernel"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Duration, Layer, Schema } from "effect"
import * as Fs from "node:fs"
import { Launch, Pipeline, Stage } from "../src/index.js"

export const Verdict = Schema.Struct({
  file: Schema.String,
  risk: Schema.Literal("low", "high"),
  notes: Schema.String
})
export type Verdict = typeof Verdict.Type

export const Summary = Schema.Struct({ high: Schema.Array(Schema.String), text: Schema.String })

export interface File {
  readonly name: string
  readonly content: string
}

export const files = (n: number): ReadonlyArray<File> =>
  Array.from({ length: n }, (_, i) => ({ name: `src/file${String(i).padStart(2, "0")}.ts`, content: i % 3 === 0 ? "eval(input)" : `export const x${i} = ${i}` }))

/** The index in a file name `src/fileNN.ts` of a review prompt; -1 for another prompt. */
export const fileIndex = (prompt: string): number => Number(/file(\d+)\.ts/.exec(prompt)?.[1] ?? -1)

export const reviewPrompt = (file: File) => `Review ${file.name} for risk:\n${file.content}`

export const review = Stage.make({
  name: "review",
  prompt: reviewPrompt,
  outputSchema: Verdict
})

export const summary = Stage.make({
  name: "summary",
  prompt: (verdicts: ReadonlyArray<Verdict>) => `Summarize these verdicts:\n${JSON.stringify(verdicts)}`,
  outputSchema: Summary
})

export const pipeline = Pipeline.from<File>().pipe(
  Pipeline.through(review, { concurrency: 4 }),
  Pipeline.gather(summary)
)

/** The text of a request's last user message: the prompt for a session's first request. */
export const lastUserText = FakeModel.promptOf

/** The verdict FakeModel gives a review prompt: `eval` is high risk. */
export const verdictFor = (prompt: string): Verdict => {
  const file = /Review (\S+) for risk/.exec(prompt)?.[1] ?? "unknown"
  const high = prompt.includes("eval(")
  return { file, risk: high ? "high" : "low", notes: high ? "evaluates its input" : "plain constant" }
}

export interface ModelOptions {
  /** Usage of every structured reply: sets what each turn costs. */
  readonly usage?: { readonly input_tokens: number; readonly output_tokens: number } | undefined
  /** Pause before each delta of a reply, by its prompt. */
  readonly delay?: ((prompt: string) => Duration.DurationInput) | undefined
}

/** Answers review and summary prompts through the StructuredOutput tool; anything else with text. */
export const answer = (options: ModelOptions = {}) => (request: FakeModel.RecordedRequest): FakeModel.Reply => {
  if (!FakeModel.isConversation(request)) return FakeModel.text("ok")
  const prompt = lastUserText(request)
  const structured = (value: Readonly<Record<string, unknown>>) => {
    const reply = FakeModel.withUsage(FakeModel.toolUse("StructuredOutput", value), options.usage ?? {})
    return options.delay === undefined ? reply : FakeModel.withDelay(reply, options.delay(prompt))
  }
  if (prompt.startsWith("Review ")) return structured(verdictFor(prompt))
  if (prompt.startsWith("Summarize these verdicts:")) {
    const verdicts = Schema.decodeUnknownSync(Schema.parseJson(Schema.Array(Verdict)))(prompt.slice(prompt.indexOf("\n") + 1))
    const high = verdicts.filter((v) => v.risk === "high").map((v) => v.file)
    return structured({ high, text: `${verdicts.length} files, ${high.length} high risk` })
  }
  return FakeModel.text("Noted.")
}

/** Every session of a run against `model`, offline, in the test's own folders. */
export const launch = (model: { readonly url: string }, d: ClaudeCli.OfflineDirs) =>
  Launch.layer({
    cwd: d.cwd,
    configDir: d.configDir,
    env: ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir: d.configDir, tmpDir: d.tmpDir }),
    bare: true,
    stopTimeouts: { stdinGrace: "500 millis", termGrace: "500 millis" }
  })

export const layer = Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer)

/** Requests whose last user message is exactly this prompt: one per session that was sent it. */
export const requestsFor = (requests: ReadonlyArray<FakeModel.RecordedRequest>, prompt: string) =>
  requests.filter((r) => FakeModel.isConversation(r) && lastUserText(r) === prompt).length

/** Pids of live processes whose environment names this config folder: the CLIs a test started there. */
export const clisUnder = (configDir: string): ReadonlyArray<number> =>
  Fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).flatMap((pid) => {
    try {
      const env = Fs.readFileSync(`/proc/${pid}/environ`, "utf8").split("\0")
      return env.includes(`CLAUDE_CONFIG_DIR=${configDir}`) ? [Number(pid)] : []
    } catch {
      return []
    }
  })
