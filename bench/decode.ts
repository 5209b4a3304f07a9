/**
 * Decode throughput: skein's framing + lenient decoding against a baseline of
 * `split("\n")` + `JSON.parse` over the same bytes, measured in the same run.
 *
 *   npm run bench            # 50 MB corpus, 5 rounds
 *   npm run bench -- 200 7   # 200 MB corpus, 7 rounds
 *
 * The corpus is the real CLI captures in packages/protocol/test/fixtures,
 * replicated. Each round runs every contender in a fresh process of its own
 * (one warm-up, then three timed runs, the median kept), and rounds alternate
 * between contenders; the median round is reported, since the machines are
 * shared and noisy. A process per contender, because contenders sharing one
 * heap disturb each other: the buffer contender keeps every decoded line until
 * it returns, and the stream row measured after it took 802 ms against 446 ms
 * next to the baseline alone, a full collection between runs notwithstanding.
 * Each row also gives the median CPU time (all threads, the collector's
 * included), which a loaded machine disturbs less than wall time.
 */
import { CliMessage, Lenient, StreamJson } from "@skein/protocol"
import { Chunk, Effect, Stream } from "effect"
import { fork } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"

const targetMB = Number(process.argv[2] ?? 50)
const rounds = Number(process.argv[3] ?? 5)
/** Set in a child: the one contender it runs. */
const only = process.argv[4]
const chunkSize = 64 * 1024

const fixtures = path.join(import.meta.dirname, "../packages/protocol/test/fixtures")
const captures = fs.readdirSync(fixtures).filter((f) => f.endsWith(".ndjson")).sort()
if (captures.length === 0) throw new Error(`no captures in ${fixtures}`)
const seed = Buffer.concat(captures.map((f) => {
  const bytes = fs.readFileSync(path.join(fixtures, f))
  return bytes[bytes.length - 1] === 0x0a ? bytes : Buffer.concat([bytes, Buffer.from("\n")])
}))
const copies = Math.ceil((targetMB * 1024 * 1024) / seed.length)
const corpus = new Uint8Array(Buffer.concat(Array.from({ length: copies }, () => seed)))
const chunks: Array<Uint8Array> = []
for (let at = 0; at < corpus.length; at += chunkSize) chunks.push(corpus.subarray(at, at + chunkSize))
const megabytes = corpus.length / (1024 * 1024)

const baseline = (): number => {
  const lines = new TextDecoder().decode(corpus).split("\n")
  let n = 0
  for (const line of lines) {
    if (line.length === 0) continue
    JSON.parse(line)
    n++
  }
  return n
}

const skeinSync = (): number => {
  let n = 0
  for (const decoded of Lenient.decodeAll(CliMessage.decoder, corpus)) {
    if (decoded._tag !== "Message") throw new Error(`line ${decoded.line}: ${decoded._tag}`)
    n++
  }
  return n
}

const skeinStream = (): number =>
  Effect.runSync(
    // One chunk per read, as a pipe delivers them.
    StreamJson.decodeStdout(Stream.fromChunks(...chunks.map(Chunk.of))).pipe(
      Stream.runFold(0, (n, decoded) => {
        if (decoded._tag !== "Message") throw new Error(`line ${decoded.line}: ${decoded._tag}`)
        return n + 1
      })
    )
  )

const contenders: Record<string, () => number> = {
  baseline,
  "skein (buffer)": skeinSync,
  "skein (stream, 64 KiB chunks)": skeinStream
}

interface Sample {
  readonly ms: number
  readonly cpu: number
  readonly lines: number
}

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

/** In a child: one warm-up run for the JIT, then the median of three timed runs. */
const runOne = (name: string): Sample => {
  const run = contenders[name]!
  const lines = run()
  const samples: Array<Sample> = []
  for (let i = 0; i < 3; i++) {
    const start = process.hrtime.bigint()
    const cpuStart = process.cpuUsage()
    const n = run()
    const ms = Number(process.hrtime.bigint() - start) / 1e6
    const cpu = process.cpuUsage(cpuStart)
    if (n !== lines) throw new Error(`${name} saw ${n} lines, then ${lines}`)
    samples.push({ ms, cpu: (cpu.user + cpu.system) / 1000, lines })
  }
  return { ms: median(samples.map((s) => s.ms)), cpu: median(samples.map((s) => s.cpu)), lines }
}

/** In the parent: run one contender in a fresh process and read its sample. */
const inChild = (name: string): Promise<Sample> =>
  new Promise((resolve, reject) => {
    const child = fork(import.meta.filename, [String(targetMB), String(rounds), name], { stdio: ["ignore", "pipe", "inherit", "ipc"] })
    let sample: Sample | undefined
    child.on("message", (message) => {
      sample = message as Sample
    })
    child.on("error", reject)
    child.on("exit", (code) => sample ? resolve(sample) : reject(new Error(`${name}: child exited with ${code}`)))
  })

const main = async () => {
  const times: Record<string, Array<number>> = Object.fromEntries(Object.keys(contenders).map((k) => [k, []]))
  const cpuTimes: Record<string, Array<number>> = Object.fromEntries(Object.keys(contenders).map((k) => [k, []]))
  let lineCount = 0
  for (let round = 0; round < rounds; round++) {
    for (const name of Object.keys(contenders)) {
      const sample = await inChild(name)
      if (lineCount === 0) lineCount = sample.lines
      else if (sample.lines !== lineCount) throw new Error(`${name} saw ${sample.lines} lines, expected ${lineCount}`)
      times[name]!.push(sample.ms)
      cpuTimes[name]!.push(sample.cpu)
    }
  }
  const base = median(times["baseline"]!)
  const baseCpu = median(cpuTimes["baseline"]!)
  console.log(
    `corpus: ${captures.length} captures x ${copies} = ${megabytes.toFixed(1)} MB, ${lineCount} lines; median of ${rounds} rounds, a process per contender and round`
  )
  for (const name of Object.keys(contenders)) {
    const ms = median(times[name]!)
    const cpu = median(cpuTimes[name]!)
    const mbs = megabytes / (ms / 1000)
    const lps = lineCount / (ms / 1000)
    console.log(
      `${name.padEnd(30)} ${ms.toFixed(0).padStart(6)} ms  ${mbs.toFixed(1).padStart(7)} MB/s  ${(lps / 1000).toFixed(0).padStart(6)}k lines/s  ${(base / ms).toFixed(2)}x baseline  (CPU ${cpu.toFixed(0)} ms, ${(baseCpu / cpu).toFixed(2)}x)`
    )
  }
}

if (only !== undefined) process.send!(runOne(only))
else await main()
