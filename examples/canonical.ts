/**
 * Translate a stream-json capture to opencode's canonical events, or a
 * transcript to its message history.
 *
 *   npx tsx examples/canonical.ts capture.ndjson          # canonical + legacy flat events, NDJSON
 *   npx tsx examples/canonical.ts capture.ndjson --v2     # canonical only (Accept-Event-Version: 2)
 *   npx tsx examples/canonical.ts capture.ndjson --check  # verify the invariants; exit 1 at the first violation
 *   npx tsx examples/canonical.ts --transcript session.jsonl   # {info, parts} per line
 *
 * A capture has no host sends, so its turn boundaries come from the session's
 * turn tracker run over the same messages, and at the end of the input every
 * open part is closed as an interrupted turn closes it.
 */
import { Args, Command, Options } from "@effect/cli"
import { FileSystem } from "@effect/platform"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { CliMessage, Lenient } from "@skein/protocol"
import { EventTranslator, History, Invariants } from "@skein/canonical"
import { Console, Data, Effect, Option } from "effect"

class MissingInput extends Data.TaggedError("MissingInput")<{}> {
  override get message() {
    return "give a capture file, or --transcript <file>"
  }
}

class InvariantViolated extends Data.TaggedError("InvariantViolated")<Invariants.Violation> {
  override get message() {
    return `event ${this.index}: ${this.rule}: ${this.detail}`
  }
}

const translateCapture = (path: string, options: { readonly v2: boolean; readonly check: boolean }) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const decoded = Lenient.decodeAll(CliMessage.decoder, yield* fs.readFile(path))
    const cliSessionId = EventTranslator.cliSessionIdOf(decoded) ?? "unknown"
    const events = EventTranslator.translateAll({ cliSessionId, legacy: !options.v2 }, decoded)
    if (options.check) {
      const violation = Invariants.check(events)
      if (violation !== undefined) return yield* new InvariantViolated(violation)
      return yield* Console.log(`${events.length} events from ${decoded.length} lines: every invariant holds`)
    }
    for (const event of events) yield* Console.log(JSON.stringify(event))
  })

const printHistory = (path: string) =>
  Effect.gen(function*() {
    const history = yield* History.fromTranscript(path)
    for (const message of history.messages) yield* Console.log(JSON.stringify(message))
  })

const file = Args.file({ name: "capture", exists: "yes" }).pipe(
  Args.withDescription("a stream-json capture (stdout of the CLI)"),
  Args.optional
)
const v2 = Options.boolean("v2").pipe(Options.withDescription("canonical events only, without the legacy flat events"))
const check = Options.boolean("check").pipe(Options.withDescription("verify the invariants instead of printing"))
const transcript = Options.file("transcript", { exists: "yes" }).pipe(
  Options.withDescription("print the history of this transcript instead"),
  Options.optional
)

const canonical = Command.make("canonical", { file, v2, check, transcript }, ({ check, file, transcript, v2 }) =>
  Effect.gen(function*() {
    if (Option.isSome(transcript)) return yield* printHistory(transcript.value)
    if (Option.isNone(file)) return yield* new MissingInput()
    yield* translateCapture(file.value, { v2, check })
  })).pipe(Command.withDescription("Claude Code stream-json to opencode's canonical events."))

const cli = Command.run(canonical, { name: "skein-canonical", version: "0.0.0" })

cli(process.argv).pipe(Effect.provide(NodeContext.layer), NodeRuntime.runMain)
