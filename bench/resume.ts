/**
 * Resume cost follows the tail, not the file: ResumeLoader on a 1 GB
 * transcript whose last compact boundary lies in the final 1%, against a
 * 10 MB transcript with the same tail, in the same run. Target: ≤ 2×.
 *
 *   npx tsx bench/resume.ts                 # 1024 MB vs 10 MB, then the real CLI anchor
 *   npx tsx bench/resume.ts 256 --no-cli    # smaller, without the CLI
 *
 * The files are generated in a temp dir from entries shaped like the CLI's
 * own (prompts, attachments, thinking/text/tool_use assistants, tool
 * results, api-request bookkeeping) and deleted afterwards. Runs alternate
 * between the two files and the median is reported; the page cache is warm
 * for both (the files were just written).
 *
 * The anchor: the real CLI `--resume`s the big file against FakeModel; the
 * time is from spawn to the first conversation request FakeModel records.
 */
import { NodeContext } from "@effect/platform-node"
import { ResumeLoader } from "@skein/store"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Duration, Effect, Option } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

const args = process.argv.slice(2)
const bigMB = Number(args.find((a) => /^\d+$/.test(a)) ?? 1024)
const withCli = !args.includes("--no-cli")
const rounds = 7
const MB = 1024 * 1024
const tailTarget = Math.floor(bigMB * MB * 0.009) // the boundary sits inside the final 1%
const smallMB = 10

const sessionId = "5e55a0e0-0000-4000-8000-000000000001"
const cwd = "/work/bench-project"
let counter = 0
const uuid = () => `00000000-0000-4000-8000-${(counter++).toString(16).padStart(12, "0")}`
const stamp = "2026-01-01T00:00:00.000Z"
const words = "the quick brown fox jumps over the lazy dog while skein keeps every transcript resumable".split(" ")
const prose = (n: number) => Array.from({ length: n }, (_, i) => words[(i * 7 + counter) % words.length]).join(" ")

const common = (id: string, parent: string | null) => ({
  parentUuid: parent,
  isSidechain: false,
  uuid: id,
  timestamp: stamp,
  userType: "external",
  entrypoint: "sdk-cli",
  cwd,
  sessionId,
  version: "2.1.332",
  gitBranch: "main"
})

/** One turn: prompt, attachments, thinking + text + tool_use, tool result, answer; with bookkeeping. Returns lines and the leaf. */
const turn = (parent: string | null): { lines: Array<string>; leaf: string } => {
  const lines: Array<unknown> = []
  const prompt = uuid()
  lines.push({ type: "queue-operation", operation: "enqueue", timestamp: stamp, sessionId, content: "Please look at the logs" })
  lines.push({ ...common(prompt, parent), type: "user", promptId: uuid(), message: { role: "user", content: `Please look at the logs: ${prose(40)}` }, permissionMode: "default" })
  lines.push({ type: "api-request-blob", sessionId, content: [{ type: "text", text: prose(900) }] })
  let last = prompt
  for (const attachment of [{ type: "date", date: "2026-01-01" }, { type: "session_context", context: {} }]) {
    const id = uuid()
    lines.push({ ...common(id, last), type: "attachment", attachment })
    last = id
  }
  const messageId = `msg_${uuid()}`
  const usage = { input_tokens: 1200, output_tokens: 300, cache_creation_input_tokens: 0, cache_read_input_tokens: 800 }
  const assistant = (content: unknown) => {
    const id = uuid()
    lines.push({
      ...common(id, last),
      type: "assistant",
      requestId: "req_bench",
      message: { id: messageId, type: "message", role: "assistant", model: "claude-bench", content: [content], stop_reason: null, stop_sequence: null, usage }
    })
    last = id
  }
  const toolId = `toolu_${uuid()}`
  assistant({ type: "thinking", thinking: prose(120), signature: "sig".repeat(40) })
  assistant({ type: "text", text: prose(60) })
  assistant({ type: "tool_use", id: toolId, name: "Bash", input: { command: "tail -n 200 app.log", description: "read the log" } })
  const result = uuid()
  lines.push({
    ...common(result, last),
    type: "user",
    message: { role: "user", content: [{ type: "tool_result", tool_use_id: toolId, content: prose(700), is_error: false }] },
    toolUseResult: { stdout: prose(700), stderr: "", interrupted: false }
  })
  last = result
  lines.push({ type: "api-request", sessionId, requestId: "req_bench", model: "claude-bench" })
  const answer = uuid()
  lines.push({
    ...common(answer, last),
    type: "assistant",
    requestId: "req_bench",
    message: { id: `msg_${uuid()}`, type: "message", role: "assistant", model: "claude-bench", content: [{ type: "text", text: prose(150) }], stop_reason: "end_turn", stop_sequence: null, usage }
  })
  lines.push({ type: "last-prompt", lastPrompt: "Please look at the logs", leafUuid: answer, sessionId })
  return { lines: lines.map((line) => JSON.stringify(line)), leaf: answer }
}

/** Appends turns until `bytes` were written; returns the leaf. */
const writeTurns = (fd: number, bytes: number, parent: string | null): string | null => {
  let written = 0
  let leaf = parent
  let batch: Array<string> = []
  while (written < bytes) {
    const t = turn(leaf)
    leaf = t.leaf
    for (const line of t.lines) {
      batch.push(line)
      written += line.length + 1
    }
    if (batch.length > 2000) {
      fs.writeSync(fd, batch.join("\n") + "\n")
      batch = []
    }
  }
  if (batch.length > 0) fs.writeSync(fd, batch.join("\n") + "\n")
  return leaf
}

/** The tail: boundary, summary, turns, metadata; the same bytes for both files. */
const makeTail = (logicalParent: string | null): string => {
  const boundary = uuid()
  const summary = uuid()
  const lines = [
    JSON.stringify({
      ...common(boundary, null),
      logicalParentUuid: logicalParent,
      type: "system",
      subtype: "compact_boundary",
      content: "Conversation compacted",
      isMeta: false,
      level: "info",
      compactMetadata: { trigger: "auto", preTokens: 180000, postTokens: 9000 }
    }),
    JSON.stringify({
      ...common(summary, boundary),
      type: "user",
      isCompactSummary: true,
      isVisibleInTranscriptOnly: true,
      message: { role: "user", content: `This session is being continued from a previous conversation. ${prose(400)}` }
    })
  ]
  let leaf = summary
  let size = 0
  while (size < tailTarget) {
    const t = turn(leaf)
    leaf = t.leaf
    for (const line of t.lines) {
      lines.push(line)
      size += line.length + 1
    }
  }
  lines.push(JSON.stringify({ type: "custom-title", customTitle: "bench session", sessionId }))
  return lines.join("\n") + "\n"
}

const writeFile = (file: string, prefixBytes: number, tail: string) => {
  const fd = fs.openSync(file, "w", 0o600)
  try {
    writeTurns(fd, prefixBytes, null)
    fs.writeSync(fd, tail)
  } finally {
    fs.closeSync(fd)
  }
}

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const time = (file: string) =>
  Effect.gen(function*() {
    const start = performance.now()
    const view = yield* ResumeLoader.load(file)
    return { ms: performance.now() - start, view }
  })

const stripCacheControl = (value: unknown): unknown =>
  Array.isArray(value)
    ? value.map(stripCacheControl)
    : typeof value === "object" && value !== null
    ? Object.fromEntries(Object.entries(value).filter(([key]) => key !== "cache_control").map(([k, v]) => [k, stripCacheControl(v)]))
    : value

const cliAnchor = (root: string, big: string) =>
  Effect.gen(function*() {
    const model = yield* FakeModel.make()
    const projectDir = path.join(root, "config", "projects", cwd.replace(/[^a-zA-Z0-9]/g, "-"))
    fs.mkdirSync(projectDir, { recursive: true })
    const file = path.join(projectDir, `${sessionId}.jsonl`)
    fs.renameSync(big, file)
    // The CLI appends to the file as it runs: pin the view at the leaf it resumes from.
    const leaf = (yield* ResumeLoader.load(file)).leafUuid
    const start = performance.now()
    const run = yield* ClaudeCli.spawn({
      baseUrl: model.url,
      args: [...ClaudeCli.streamJsonArgs, ...ClaudeCli.leanArgs, "--resume", sessionId],
      env: { CLAUDE_CONFIG_DIR: path.join(root, "config") }
    })
    yield* run.send(ClaudeCli.userMessage("continue"))
    const first = yield* model.awaitRequest(0, FakeModel.isConversation).pipe(Effect.timeout(Duration.minutes(5)), Effect.option)
    const ms = performance.now() - start
    const exited = yield* run.exitCode.pipe(Effect.timeout(Duration.millis(1)), Effect.option)
    if (Option.isNone(first)) {
      return { ms, ok: false, detail: Option.isSome(exited) ? `exited ${exited.value}` : "no request within 5 min" }
    }
    // The CLI sends thinking blocks only of messages its current model wrote: load for that model.
    const body = Option.getOrThrow(first.value.messagesRequest)
    const view = yield* ResumeLoader.load(file, { model: body.model, resumeAt: leaf })
    const sent = body.messages.filter((m) => m.role !== "system").slice(0, -1)
    const same = JSON.stringify(stripCacheControl(sent)) === JSON.stringify(stripCacheControl(view.messages))
    return { ms, ok: true, detail: `${sent.length} history messages, ${same ? "equal to" : "DIFFERENT from"} skein's view` }
  })

const main = Effect.gen(function*() {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "skein-bench-resume-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(root, { recursive: true, force: true })))
  const big = path.join(root, "big.jsonl")
  const small = path.join(root, "small.jsonl")
  let t0 = performance.now()
  const tail = makeTail(null)
  writeFile(big, bigMB * MB - tail.length, tail)
  writeFile(small, smallMB * MB - tail.length, tail)
  const bigSize = fs.statSync(big).size
  const smallSize = fs.statSync(small).size
  console.log(`generated in ${((performance.now() - t0) / 1000).toFixed(1)} s: big ${(bigSize / MB).toFixed(0)} MB, small ${(smallSize / MB).toFixed(1)} MB, tail ${(tail.length / MB).toFixed(2)} MB (boundary at ${(100 * (bigSize - tail.length) / bigSize).toFixed(2)}% of big)`)

  const bigTimes: Array<number> = []
  const smallTimes: Array<number> = []
  yield* time(small) // warm up the JIT
  for (let i = 0; i < rounds; i++) {
    const b = yield* time(big)
    const s = yield* time(small)
    bigTimes.push(b.ms)
    smallTimes.push(s.ms)
    if (i === 0) {
      if (JSON.stringify(b.view.messages) !== JSON.stringify(s.view.messages)) throw new Error("the two views differ")
      console.log(`view: ${b.view.entries.length} entries, ${b.view.messages.length} messages; scanned ${(b.view.stats.scannedBytes / MB).toFixed(1)} MB of big, ${(s.view.stats.scannedBytes / MB).toFixed(1)} MB of small; RSS ${(process.memoryUsage().rss / MB).toFixed(0)} MB`)
    }
  }
  const mb = median(bigTimes)
  const ms = median(smallTimes)
  console.log(`ResumeLoader.load  big ${mb.toFixed(1)} ms   small ${ms.toFixed(1)} ms   ratio ${(mb / ms).toFixed(2)}x (target <= 2x)   [median of ${rounds}]`)

  if (withCli) {
    t0 = performance.now()
    const anchor = yield* cliAnchor(root, big)
    console.log(`real CLI --resume of the big file to its first request: ${(anchor.ms / 1000).toFixed(2)} s (${anchor.ok ? anchor.detail : `no request: ${anchor.detail}`}); skein ${(anchor.ms / mb).toFixed(0)}x faster`)
  }
})

Effect.runPromise(Effect.scoped(main).pipe(Effect.provide(NodeContext.layer))).catch((error) => {
  console.error(error)
  process.exit(1)
})
