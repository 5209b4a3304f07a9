/**
 * Decode throughput: skein's framing + lenient decoding against a baseline of
 * `split("\n")` + `JSON.parse` over the same bytes, measured in the same run.
 *
 *   npm run bench            # 50 MB corpus
 *   npm run bench -- 200     # 200 MB corpus
 *
 * The corpus is the real CLI captures in packages/protocol/test/fixtures,
 * replicated. Runs alternate between contenders and the median is reported,
 * since the machines are shared and noisy. A full collection runs before each
 * timed run, outside the clock: the buffer contender keeps every decoded line
 * until it returns, and without it the contender after it pays for collecting
 * that garbage (measured: the stream row took about twice as long after the
 * buffer row as after itself). Each row also gives the median CPU time of
 * this process and its ratio, which a loaded machine disturbs less than wall time.
 */
import { CliMessage, Lenient, StreamJson } from "@skein/protocol"
import { Chunk, Effect, Stream } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as v8 from "node:v8"
import * as vm from "node:vm"

const targetMB = Number(process.argv[2] ?? 50)
const rounds = Number(process.argv[3] ?? 5)
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

v8.setFlagsFromString("--expose-gc")
const collect: unknown = vm.runInNewContext("gc")
v8.setFlagsFromString("--no-expose-gc")
const fullGc = (): void => {
  if (typeof collect === "function") collect()
}

const contenders = { baseline, "skein (buffer)": skeinSync, "skein (stream, 64 KiB chunks)": skeinStream }
const times: Record<string, Array<number>> = Object.fromEntries(Object.keys(contenders).map((k) => [k, []]))
/** This process's CPU time per run (all threads, the collector's included): steadier than wall time on a loaded machine. */
const cpuTimes: Record<string, Array<number>> = Object.fromEntries(Object.keys(contenders).map((k) => [k, []]))
let lineCount = 0

for (let round = 0; round < rounds + 1; round++) {
  for (const [name, run] of Object.entries(contenders)) {
    fullGc()
    const start = process.hrtime.bigint()
    const cpuStart = process.cpuUsage()
    const lines = run()
    const ms = Number(process.hrtime.bigint() - start) / 1e6
    const cpu = process.cpuUsage(cpuStart)
    if (lineCount === 0) lineCount = lines
    else if (lines !== lineCount) throw new Error(`${name} saw ${lines} lines, expected ${lineCount}`)
    if (round > 0) {
      // round 0 warms up the JIT
      times[name]!.push(ms)
      cpuTimes[name]!.push((cpu.user + cpu.system) / 1000)
    }
  }
}

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const base = median(times["baseline"]!)
const baseCpu = median(cpuTimes["baseline"]!)
console.log(`corpus: ${captures.length} captures x ${copies} = ${megabytes.toFixed(1)} MB, ${lineCount} lines; median of ${rounds} rounds`)
for (const name of Object.keys(contenders)) {
  const ms = median(times[name]!)
  const cpu = median(cpuTimes[name]!)
  const mbs = megabytes / (ms / 1000)
  const lps = lineCount / (ms / 1000)
  console.log(
    `${name.padEnd(30)} ${ms.toFixed(0).padStart(6)} ms  ${mbs.toFixed(1).padStart(7)} MB/s  ${(lps / 1000).toFixed(0).padStart(6)}k lines/s  ${(base / ms).toFixed(2)}x baseline  (CPU ${cpu.toFixed(0)} ms, ${(baseCpu / cpu).toFixed(2)}x)`
  )
}
