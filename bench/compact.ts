/**
 * Compaction of a large transcript: skein's pass 1 (session memory), pass 2
 * (summarizing, one CLI turn over the prepared view) and the real CLI's own
 * `/compact`, on copies of the same file, in the same run, against FakeModel.
 *
 *   npx tsx bench/compact.ts            # 100 MB transcript, a ~120k-token view after its last boundary
 *   npx tsx bench/compact.ts 20 60      # 20 MB, a ~60k-token view
 *
 * The transcript is generated as a session that ran for days would look:
 * turns that read files (large tool results), compacted every few MB, then
 * the current view. Each contender works on its own copy (its own config
 * folder, same cwd and id). Reported: wall time (each includes loading the
 * file; pass 2 and `/compact` include starting a CLI) and the tokens the
 * model was sent (local estimate of every request's messages), as ratios
 * against the CLI's `/compact`. One run per contender: the machine is shared,
 * read the times as rough.
 */
import { NodeContext } from "@effect/platform-node"
import { CompactPreparation, Compaction, SummarizingCompaction, TokenCounter } from "@skein/compact"
import { ProcessHost } from "@skein/kernel"
import { Session } from "@skein/session"
import { ResumeLoader, TranscriptLayout, TranscriptStore } from "@skein/store"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Effect, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

const targetMB = Number(process.argv[2] ?? 100)
const viewTokens = Number(process.argv[3] ?? 120) * 1000
/** An earlier compaction every this many bytes. */
const segmentBytes = 5 * 1024 * 1024

const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-bench-compact-"))
const dir = (name: string) => {
  const path = Path.join(root, name)
  Fs.mkdirSync(path, { recursive: true })
  return Fs.realpathSync(path)
}
const cwd = dir("cwd")
const tmpDir = dir("tmp")
const sessionId = randomUUID()
const configs = ["memory", "summarize", "cli"].map((name) => Path.join(root, `config-${name}`))
const transcriptOf = (configDir: string) => TranscriptLayout.make(configDir).session(cwd, sessionId).transcript

/** Writes the transcript: segments of read-heavy turns, each closed by a boundary, then the view. */
const generate = (path: string): { readonly bytes: number; readonly entries: number } => {
  Fs.mkdirSync(Path.dirname(path), { recursive: true })
  const fd = Fs.openSync(path, "w", 0o600)
  let bytes = 0
  let entries = 0
  let parent: string | null = null
  let n = 0
  const common = { isSidechain: false, userType: "external", entrypoint: "sdk-cli", cwd, sessionId, version: "2.1.332", gitBranch: "HEAD" }
  const write = (entry: Record<string, unknown>) => {
    const line = JSON.stringify(entry) + "\n"
    Fs.writeSync(fd, line)
    bytes += Buffer.byteLength(line)
    entries += 1
  }
  const chain = (entry: Record<string, unknown>) => {
    const uuid = randomUUID()
    write({ parentUuid: parent, ...entry, uuid, timestamp: new Date(1_790_000_000_000 + n * 1000).toISOString(), ...common })
    parent = uuid
  }
  const assistant = (content: ReadonlyArray<unknown>) => ({
    type: "assistant",
    message: {
      id: `msg_bench_${n}`,
      type: "message",
      role: "assistant",
      model: "claude-opus-5-5",
      content,
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: { input_tokens: 1000, output_tokens: 50, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 }
    }
  })
  const turn = () => {
    n += 1
    const file = `/src/module${n % 400}.ts`
    const body = Array.from({ length: 120 }, (_, i) => `export const value${i} = compute(${n}, ${i}) // line ${i}`).join("\n")
    chain({ type: "user", message: { role: "user", content: `Step ${n}: look at ${file} and tell me what changes.` } })
    chain(assistant([{ type: "tool_use", id: `toolu_${n}`, name: "Read", input: { file_path: file } }]))
    chain({
      type: "user",
      message: { role: "user", content: [{ type: "tool_result", tool_use_id: `toolu_${n}`, content: body }] },
      toolUseResult: { type: "text", file: { filePath: file, content: body, numLines: 120, startLine: 1, totalLines: 120 } }
    })
    chain(assistant([{ type: "text", text: `In ${file}, step ${n} changes ${n % 7} values; the rest stays.` }]))
  }
  const target = targetMB * 1024 * 1024
  let segmentStart = 0
  // A JSON line carries about 2.5 times its content: ~10 bytes a token of the view.
  const viewBytes = viewTokens * 10
  const boundary = () => {
    const leaf = parent
    parent = null
    chain({
      type: "system",
      subtype: "compact_boundary",
      content: "Conversation compacted",
      logicalParentUuid: leaf,
      level: "info",
      isMeta: false,
      compactMetadata: { trigger: "auto", preTokens: 150_000, postTokens: 4_000 }
    })
    chain({ type: "user", message: { role: "user", content: `Summary: steps up to ${n} reviewed module files.` }, isCompactSummary: true, isVisibleInTranscriptOnly: true })
    segmentStart = bytes
  }
  while (bytes < target - viewBytes) {
    turn()
    if (bytes - segmentStart > segmentBytes) boundary()
  }
  if (n > 0) boundary()
  while (bytes < target) turn()
  write({ type: "last-prompt", lastPrompt: `Step ${n}`, leafUuid: parent, sessionId })
  Fs.closeSync(fd)
  return { bytes, entries }
}

const storeLayer = (configDir: string) =>
  TranscriptStore.layer.pipe(Layer.provideMerge(TranscriptLayout.layer(configDir)), Layer.merge(TokenCounter.layer))

/** Tokens of every request's messages since `from` (the local estimate). */
const tokensSent = (model: FakeModel.FakeModel["Type"], from: number) =>
  Effect.map(model.requests, (requests) =>
    requests.slice(from).reduce((sum, r) => sum + Option.match(r.messagesRequest, { onNone: () => 0, onSome: (b) => TokenCounter.estimate(b.messages) }), 0))

const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const start = performance.now()
    const value = yield* effect
    return { value, ms: performance.now() - start }
  })

const program = Effect.gen(function*() {
  const model = yield* FakeModel.make()
  const env = (configDir: string) => ClaudeCli.isolatedEnv({ baseUrl: model.url, configDir, tmpDir })
  const generated = generate(transcriptOf(configs[0]!))
  for (const configDir of configs.slice(1)) {
    Fs.mkdirSync(Path.dirname(transcriptOf(configDir)), { recursive: true })
    Fs.copyFileSync(transcriptOf(configs[0]!), transcriptOf(configDir))
  }
  const view = yield* ResumeLoader.load(transcriptOf(configs[0]!))
  const viewEstimate = TokenCounter.estimate(view.messages)
  console.log(`transcript: ${(generated.bytes / 1048576).toFixed(1)} MB, ${generated.entries} entries; view after the last boundary: ${view.entries.length} entries, ~${viewEstimate} tokens`)

  // Pass 1: summary.md, no model call.
  const summaryFile = Path.join(transcriptOf(configs[0]!).replace(/\.jsonl$/, ""), "session-memory", "summary.md")
  Fs.mkdirSync(Path.dirname(summaryFile), { recursive: true })
  Fs.writeFileSync(summaryFile, "The session reviews module files step by step; each step reads one file and reports its changes.\n")
  const before1 = (yield* model.requests).length
  const memory = yield* timed(Compaction.memoryPass({ cwd, sessionId }).pipe(Effect.provide(storeLayer(configs[0]!))))
  const memoryTokens = yield* tokensSent(model, before1)

  // Pass 2: a CLI over the prepared view writes the summary; then the boundary with restored files.
  const configDir2 = configs[1]!
  const before2 = (yield* model.requests).length
  const summarize = yield* timed(Effect.gen(function*() {
    const loaded = yield* ResumeLoader.load(transcriptOf(configDir2))
    const summary = yield* SummarizingCompaction.summarizeStored({
      launch: { cwd, configDir: configDir2, env: env(configDir2), bare: true },
      view: loaded,
      sessionId,
      entries: CompactPreparation.prepare(loaded.entries).entries
    })
    return yield* Compaction.compactWith({ cwd, sessionId, summary, pass: "summarize", restore: {} })
  }).pipe(Effect.scoped, Effect.provide(storeLayer(configDir2))))
  const summarizeTokens = yield* tokensSent(model, before2)

  // The CLI's own /compact, resumed over the same file.
  const configDir3 = configs[2]!
  const before3 = (yield* model.requests).length
  const cli = yield* timed(Effect.gen(function*() {
    const session = yield* Session.start({ cwd, configDir: configDir3, env: env(configDir3), bare: true, resume: sessionId })
    const result = yield* Effect.flatMap(session.send("/compact"), (t) => t.result)
    yield* session.end
    yield* session.exit
    return result
  }).pipe(Effect.scoped))
  const cliTokens = yield* tokensSent(model, before3)
  const compacted = Fs.readFileSync(transcriptOf(configDir3), "utf8").slice(generated.bytes).includes("\"compact_boundary\"")
  if (!compacted) throw new Error("the CLI's /compact wrote no boundary")

  const row = (name: string, ms: number, tokens: number) =>
    `${name.padEnd(22)} ${ms.toFixed(0).padStart(7)} ms  ${String(tokens).padStart(9)} tokens  time ${(ms / cli.ms).toFixed(2)}x  tokens ${(tokens / Math.max(1, cliTokens)).toFixed(2)}x`
  const outcome = (o: Compaction.Outcome) => o._tag === "Compacted" ? `${o.preTokens} -> ${o.postTokens}` : `declined (${o.reason._tag})`
  console.log(row("skein pass 1 (memory)", memory.ms, memoryTokens), ` ${outcome(memory.value)}`)
  console.log(row("skein pass 2 (summary)", summarize.ms, summarizeTokens), ` ${outcome(summarize.value)}`)
  console.log(row("CLI /compact", cli.ms, cliTokens), " (baseline)")
})

Effect.runPromise(program.pipe(
  Effect.scoped,
  Effect.provide(Layer.mergeAll(ProcessHost.layerMemory(), NodeContext.layer)),
  Effect.ensuring(Effect.sync(() => Fs.rmSync(root, { recursive: true, force: true })))
)).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
