/**
 * Pipeline overhead: a run of @skein/pipeline over N items (default 200) at
 * concurrency C (default 8) against a plain `Promise.all` loop of C workers
 * spawning the CLI directly, both on testkit's stand-in CLI (a dash script
 * that answers `initialize` and one user message with a canned turn), in the
 * same process and the same run.
 *
 *   npx tsx bench/pipeline.ts              # 200 items, concurrency 8, 3 rounds
 *   npx tsx bench/pipeline.ts 400 8 5
 *
 * baseline: each item is `child_process.spawn` of the stand-in, the
 * `initialize` request and the user message written to its stdin, stdout
 * read up to the `result` line, stdin closed and the exit awaited.
 *
 * skein: one text stage (`Stage.text`: the stand-in prints no structured
 * output) over the same items through `Run.collect`, no workflow engine in
 * context (as `skein pipeline run` without a journal would be): per item the
 * budget's admission check and count, the events and the summary, and a full
 * `Session.start` (control protocol, turn tracking, the process closed after
 * the item, off its path).
 *
 * sessions alone: the same `Session.start` + one turn + scope close per item,
 * `Effect.forEach` at the same concurrency, no pipeline: it splits skein's
 * overhead into the session's share and the pipeline's own.
 *
 * kernel alone: the baseline's item (the same two lines written, stdout read
 * up to the `result` line, stdin closed, the exit awaited) on a child of
 * `ProcessHost.spawn` in a scope closed after the item, `Effect.forEach` at
 * the same concurrency: the process host's share.
 *
 * Wall times on a shared machine swing with the other load; each contender's
 * CPU in this process per item (`process.cpuUsage`) is steadier, and is what
 * skein adds on the event loop that every session of a host shares.
 *
 * The work per item is the same on both sides: one spawn of the same
 * stand-in, `initialize` and one user message, the turn read to its
 * `result`, stdin closed, the exit awaited, at the same concurrency. skein
 * passes the CLI's flags (the stand-in ignores them) and pipes stderr where
 * the baseline ignores it: the one difference, and it counts against skein.
 *
 * The ratio is skein's wall time over the baseline's; "overhead per item" is
 * the difference over N: everything skein does that is not the CLI's own time.
 * Rounds alternate the contenders, and the best round of each is reported too.
 *
 * It runs skein as it ships, bundled (see support/shipped.ts; `--tsx` runs it
 * under tsx as before): tsx's keepNames taxes every closure skein makes per
 * item, and the baseline makes almost none.
 */
import { NodeContext } from "@effect/platform-node"
import { ProcessHost } from "@skein/kernel"
import { Launch, Pipeline, Run, Stage } from "@skein/pipeline"
import { Session } from "@skein/session"
import { StandInCli } from "@skein/testkit"
import { Effect, Layer, Logger, LogLevel } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Shipped from "./support/shipped.js"

const shippedExit = await Shipped.rerun(import.meta.filename)
if (shippedExit !== undefined) process.exit(shippedExit)

const args = process.argv.slice(2).filter((arg) => arg !== "--tsx")
const count = Number(args[0] ?? 200)
const concurrency = Number(args[1] ?? 8)
const rounds = Number(args[2] ?? 3)

const cli = StandInCli.command()
const cwd = Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), "skein-bench-pipeline-")))
process.on("exit", () => Fs.rmSync(cwd, { recursive: true, force: true }))

const items = Array.from({ length: count }, (_, i) => `item ${i}`)

// --- baseline: a Promise.all loop of direct spawns ---------------------------------

const initialize = `${JSON.stringify({ type: "control_request", request_id: "init-1", request: { subtype: "initialize" } })}\n`

const direct = (prompt: string): Promise<string> =>
  new Promise((resolve, reject) => {
    const child = ChildProcess.spawn(cli.command, [...cli.args], { cwd, stdio: ["pipe", "pipe", "ignore"] })
    let buffer = ""
    let answer: string | undefined
    child.stdout.setEncoding("utf8").on("data", (text: string) => {
      buffer += text
      const lines = buffer.split("\n")
      buffer = lines.pop() ?? ""
      for (const line of lines) {
        if (answer === undefined && line.startsWith("{\"type\":\"result\"")) {
          answer = JSON.parse(line).result
          child.stdin.end()
        }
      }
    })
    child.once("error", reject)
    child.once("close", () => answer === undefined ? reject(new Error("no result")) : resolve(answer))
    child.stdin.write(initialize)
    child.stdin.write(`${JSON.stringify({ type: "user", message: { role: "user", content: prompt } })}\n`)
  })

const baseline = async (): Promise<number> => {
  const started = performance.now()
  let next = 0
  const answers: Array<string> = []
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < items.length) {
      const i = next++
      answers[i] = await direct(items[i]!)
    }
  }))
  if (answers.length !== count) throw new Error("baseline: missing answers")
  return performance.now() - started
}

// --- skein: a one-stage pipeline --------------------------------------------------

const answer = Stage.text({ name: "answer", prompt: (item: string) => item })
const pipeline = Pipeline.from<string>().pipe(Pipeline.through(answer, { concurrency }))

const launch = Launch.layer({
  cwd,
  executable: cli.command,
  executableArgs: cli.args,
  stopTimeouts: { stdinGrace: "2 seconds", termGrace: "1 second" }
})

const skein = Effect.gen(function*() {
  const started = performance.now()
  const result = yield* Run.collect(pipeline, items)
  if (result.outputs.length !== count) return yield* Effect.dieMessage(`skein: ${result.outputs.length} of ${count} answers`)
  return performance.now() - started
}).pipe(
  Effect.provide(Layer.mergeAll(launch, ProcessHost.layerMemory(), NodeContext.layer)),
  Logger.withMinimumLogLevel(LogLevel.Error)
)

// --- sessions: the same sessions without the pipeline ------------------------------

const sessionsOnly = Effect.gen(function*() {
  const options = yield* Launch.Launch
  const started = performance.now()
  const answers = yield* Effect.forEach(
    items,
    (prompt) => Effect.scoped(Effect.flatMap(Session.start(options), (session) => Effect.flatMap(session.send(prompt), (turn) => turn.result))),
    { concurrency }
  )
  if (answers.length !== count) return yield* Effect.dieMessage("sessions: missing answers")
  return performance.now() - started
}).pipe(
  Effect.provide(Layer.mergeAll(launch, ProcessHost.layerMemory(), NodeContext.layer)),
  Logger.withMinimumLogLevel(LogLevel.Error)
)

// --- kernel: the baseline's item on ProcessHost -------------------------------------

const utf8 = new TextDecoder()

const hosted = (prompt: string) =>
  Effect.scoped(Effect.gen(function*() {
    const child = yield* ProcessHost.spawn({ command: cli.command, args: cli.args, cwd })
    yield* child.write(initialize)
    yield* child.write(`${JSON.stringify({ type: "user", message: { role: "user", content: prompt } })}\n`)
    let buffer = ""
    let answer: string | undefined
    while (answer === undefined) {
      const chunk = yield* Effect.option(child.pullStdout)
      if (chunk._tag === "None") break
      for (const bytes of chunk.value) buffer += utf8.decode(bytes, { stream: true })
      const lines = buffer.split("\n")
      buffer = lines.pop() ?? ""
      for (const line of lines) {
        if (answer === undefined && line.startsWith("{\"type\":\"result\"")) answer = JSON.parse(line).result
      }
    }
    yield* child.closeStdin
    yield* child.await
    return answer === undefined ? yield* Effect.dieMessage("kernel: no result") : answer
  }))

const kernelOnly = Effect.gen(function*() {
  const started = performance.now()
  const answers = yield* Effect.forEach(items, hosted, { concurrency })
  if (answers.length !== count) return yield* Effect.dieMessage("kernel: missing answers")
  return performance.now() - started
}).pipe(
  Effect.provide(ProcessHost.layerMemory({ stopTimeouts: { stdinGrace: "2 seconds", termGrace: "1 second" } })),
  Logger.withMinimumLogLevel(LogLevel.Error)
)

// --- rounds ------------------------------------------------------------------------

/** Wall time and this process's CPU (user + system) per item. */
const measure = async (run: () => Promise<number>): Promise<{ readonly wall: number; readonly cpu: number }> => {
  const before = process.cpuUsage()
  const wall = await run()
  const used = process.cpuUsage(before)
  return { wall, cpu: (used.user + used.system) / 1000 / count }
}

const ms = (n: number) => `${n.toFixed(0)} ms`

const main = async () => {
  console.log(`pipeline bench: ${count} items, concurrency ${concurrency}, ${rounds} rounds, stand-in CLI (${cli.command})`)
  // One of each first, unmeasured: module loading, JIT, the shell's page cache.
  await baseline()
  await Effect.runPromise(skein)
  const base: Array<number> = []
  const ours: Array<number> = []
  const bare: Array<number> = []
  const host: Array<number> = []
  const cpu = { base: [] as Array<number>, ours: [] as Array<number>, bare: [] as Array<number>, host: [] as Array<number> }
  for (let round = 1; round <= rounds; round++) {
    const b = await measure(baseline)
    const s = await measure(() => Effect.runPromise(skein))
    const o = await measure(() => Effect.runPromise(sessionsOnly))
    const k = await measure(() => Effect.runPromise(kernelOnly))
    base.push(b.wall)
    ours.push(s.wall)
    bare.push(o.wall)
    host.push(k.wall)
    cpu.base.push(b.cpu)
    cpu.ours.push(s.cpu)
    cpu.bare.push(o.cpu)
    cpu.host.push(k.cpu)
    console.log(
      `round ${round}: baseline ${ms(b.wall)}, skein ${ms(s.wall)}, ratio ${(s.wall / b.wall).toFixed(3)}, overhead per item ${((s.wall - b.wall) / count).toFixed(2)} ms; ` +
        `sessions alone ${ms(o.wall)} (the pipeline's own share: ${((s.wall - o.wall) / count).toFixed(2)} ms per item); ` +
        `kernel alone ${ms(k.wall)} (ratio ${(k.wall / b.wall).toFixed(3)}); ` +
        `cpu per item: baseline ${b.cpu.toFixed(2)}, kernel ${k.cpu.toFixed(2)}, sessions ${o.cpu.toFixed(2)}, skein ${s.cpu.toFixed(2)} ms`
    )
  }
  const best = (xs: ReadonlyArray<number>) => Math.min(...xs)
  const median = (xs: ReadonlyArray<number>) => xs.toSorted((a, b) => a - b)[Math.floor(xs.length / 2)]!
  console.log(
    `best: baseline ${ms(best(base))}, skein ${ms(best(ours))}, ratio ${(best(ours) / best(base)).toFixed(3)}; ` +
      `median ratio ${(median(ours) / median(base)).toFixed(3)} (target <= 1.1); ` +
      `pipeline over sessions alone: median ratio ${(median(ours) / median(bare)).toFixed(3)}; ` +
      `kernel alone over baseline: median ratio ${(median(host) / median(base)).toFixed(3)}`
  )
  console.log(
    `median cpu per item: baseline ${median(cpu.base).toFixed(2)} ms, kernel ${median(cpu.host).toFixed(2)} ms, ` +
      `sessions ${median(cpu.bare).toFixed(2)} ms, skein ${median(cpu.ours).toFixed(2)} ms (ratio ${(median(cpu.ours) / median(cpu.base)).toFixed(2)})`
  )
}

main().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
