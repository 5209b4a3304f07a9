/**
 * Decode a stream-json capture and report what is in it.
 *
 *   npx tsx examples/decode.ts capture.ndjson
 *   claude -p ... --output-format stream-json --verbose | npx tsx examples/decode.ts
 *   npx tsx examples/decode.ts capture.ndjson --json
 *
 * Counts messages per type/subtype; lists Unknown messages and every
 * diagnostic (Malformed, Unparseable, Oversized) by line number.
 */
import { Args, Command, Options } from "@effect/cli"
import { FileSystem } from "@effect/platform"
import { NodeContext, NodeRuntime, NodeStream } from "@effect/platform-node"
import { CliMessage, type Lenient, StreamJson } from "@skein/protocol"
import { Console, Effect, Option, Stream } from "effect"

interface Report {
  lines: number
  counts: Record<string, number>
  unknown: Array<{ line: number; type: string | null; subtype: string | null }>
  diagnostics: Array<{ line: number; kind: string; detail: string }>
}

const kindOf = (message: CliMessage.CliMessage): string => {
  switch (message.type) {
    case "system":
    case "result":
      return `${message.type}/${message.subtype}`
    case "control_request":
      return `control_request/${message.request.subtype}`
    case "control_response":
      return `control_response/${message.response.subtype}`
    case "stream_event":
      return `stream_event/${message.event.type}`
    default:
      return message.type
  }
}

const tally = (report: Report, decoded: Lenient.Decoded<CliMessage.CliMessage>): Report => {
  report.lines++
  switch (decoded._tag) {
    case "Message": {
      const kind = kindOf(decoded.message)
      report.counts[kind] = (report.counts[kind] ?? 0) + 1
      break
    }
    case "Unknown":
      report.unknown.push({ line: decoded.line, type: decoded.type ?? null, subtype: decoded.subtype ?? null })
      break
    case "Malformed":
      report.diagnostics.push({
        line: decoded.line,
        kind: "Malformed",
        detail: `${decoded.type}${decoded.subtype ? `/${decoded.subtype}` : ""}: ${decoded.issue}`
      })
      break
    case "Unparseable":
      report.diagnostics.push({ line: decoded.line, kind: "Unparseable", detail: decoded.error })
      break
    case "Oversized":
      report.diagnostics.push({ line: decoded.line, kind: "Oversized", detail: `${decoded.bytes} bytes > ${decoded.limit}` })
      break
  }
  return report
}

const print = (report: Report) =>
  Effect.gen(function*() {
    const kinds = Object.keys(report.counts).sort()
    const width = Math.max(8, ...kinds.map((k) => k.length))
    yield* Console.log(`${report.lines} lines`)
    for (const kind of kinds) yield* Console.log(`  ${kind.padEnd(width)}  ${report.counts[kind]}`)
    if (report.unknown.length > 0) {
      yield* Console.log(`Unknown (${report.unknown.length}):`)
      for (const u of report.unknown) yield* Console.log(`  line ${u.line}: ${u.type ?? "(no type)"}${u.subtype ? `/${u.subtype}` : ""}`)
    }
    if (report.diagnostics.length > 0) {
      yield* Console.log(`Diagnostics (${report.diagnostics.length}):`)
      for (const d of report.diagnostics) yield* Console.log(`  line ${d.line}: ${d.kind} ${d.detail}`)
    }
  })

const file = Args.file({ name: "file", exists: "yes" }).pipe(
  Args.withDescription("a stream-json capture; standard input if omitted"),
  Args.optional
)
const json = Options.boolean("json").pipe(Options.withDescription("print the report as one JSON object"))

const decode = Command.make("decode", { file, json }, ({ file, json }) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const bytes = Option.match(file, {
      onNone: () => NodeStream.stdin,
      onSome: (path) => fs.stream(path)
    })
    const report = yield* StreamJson.decodeStdout(bytes).pipe(
      Stream.runFold<Report, Lenient.Decoded<CliMessage.CliMessage>>(
        { lines: 0, counts: {}, unknown: [], diagnostics: [] },
        tally
      )
    )
    yield* json ? Console.log(JSON.stringify(report, null, 2)) : print(report)
  })
).pipe(Command.withDescription("Decode Claude Code stream-json and report types, unknowns and diagnostics."))

const cli = Command.run(decode, { name: "skein-decode", version: "0.0.0" })

cli(process.argv).pipe(Effect.provide(NodeContext.layer), NodeRuntime.runMain)
