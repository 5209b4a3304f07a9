/**
 * The demo behind `npm start`: the real Claude Code CLI runs one turn against
 * skein's embedded FakeModel, and every message it prints on the stream-json
 * bus is decoded by @skein/protocol and shown as it arrives.
 *
 * Offline and hermetic: the CLI talks only to FakeModel on 127.0.0.1, with a
 * private config directory and non-essential traffic off.
 */
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Anthropic, CliMessage, Control, HostMessage, type Lenient, StreamJson } from "@skein/protocol"
import { ClaudeCli, FakeModel } from "@skein/testkit"
import { Console, Duration, Effect, Stream } from "effect"

const tty = process.stdout.isTTY === true
const paint = (code: number) => (text: string) => tty ? `\x1b[${code}m${text}\x1b[0m` : text
const dim = paint(2)
const bold = paint(1)
const cyan = paint(36)
const yellow = paint(33)
const red = paint(31)
const green = paint(32)

const prompt = "What is skein, in one paragraph?"

const script = [FakeModel.withDelay(
  FakeModel.combine(
    FakeModel.thinking("The user asks about skein. I should explain it briefly: a host for agent CLIs."),
    FakeModel.text(
      "skein is a runtime for hosting agent CLIs such as Claude Code as supervised actors: " +
        "it drives the stream-json bus, answers permission and hook requests, keeps transcripts " +
        "the CLI can resume, and serves every session's events. 🧶"
    )
  ),
  Duration.millis(40)
)]

/** Text and thinking deltas are written inline; everything else gets a line of its own. */
type Output = { readonly line: string } | { readonly inline: string } | undefined

const show = (decoded: Lenient.Decoded<CliMessage.CliMessage>): Output => {
  const line = (text: string) => ({ line: text })
  const inline = (text: string) => ({ inline: text })
  switch (decoded._tag) {
    case "Unknown":
      return line(yellow(`? line ${decoded.line}: unknown ${decoded.type ?? "(no type)"}${decoded.subtype ? `/${decoded.subtype}` : ""} (kept as data)`))
    case "Malformed":
      return line(red(`! line ${decoded.line}: malformed ${decoded.type}: ${decoded.issue}`))
    case "Unparseable":
      return line(red(`! line ${decoded.line}: not JSON: ${decoded.error}`))
    case "Oversized":
      return line(red(`! line ${decoded.line}: ${decoded.bytes} bytes, over the ${decoded.limit} limit`))
    case "Message":
      break
  }
  const m = decoded.message
  switch (m.type) {
    case "system":
      switch (m.subtype) {
        case "init":
          return line(cyan(`● init  session ${m.session_id}  model ${m.model}  ${m.tools.length} tools  CLI ${m.claude_code_version}`))
        case "session_state_changed":
          return line(cyan(`● state ${m.state}`))
        case "status":
          return line(dim(`● status ${m.status ?? "(cleared)"}`))
        case "thinking_tokens":
          return undefined
        default:
          return line(dim(`● system/${m.subtype}`))
      }
    case "stream_event": {
      const event = m.event
      if (!CliMessage.isKnownStreamEvent(event)) return line(dim(`● stream_event/${event.type} (new kind, kept)`))
      if (event.type === "content_block_start") {
        return event.content_block.type === "thinking"
          ? inline(dim("  thinking: "))
          : event.content_block.type === "text" ? inline("  ") : undefined
      }
      if (event.type === "content_block_delta") {
        const delta = event.delta
        if (!Anthropic.isKnownDelta(delta)) return undefined
        if (delta.type === "text_delta") return inline(bold(delta.text))
        if (delta.type === "thinking_delta") return inline(dim(delta.thinking))
        return undefined
      }
      if (event.type === "content_block_stop") return inline("\n")
      return undefined
    }
    case "assistant":
      return line(dim(`● assistant message ${m.message.id} (${m.message.content.map((b) => b.type).join(", ")})`))
    case "result":
      return line(green(
        `● result ${m.subtype}  ${m.num_turns} turn(s)  ${m.usage.input_tokens} in / ${m.usage.output_tokens} out tokens  $${m.total_cost_usd.toFixed(4)}  ${m.duration_ms} ms`
      ))
    case "control_response":
      return line(dim(`● control_response ${m.response.subtype} to ${m.response.request_id}`))
    default:
      return line(dim(`● ${m.type}`))
  }
}

const main = Effect.gen(function*() {
  const model = yield* FakeModel.make({ replies: script })
  yield* Console.log(dim(`FakeModel listening on ${model.url}`))
  const run = yield* ClaudeCli.spawn({
    baseUrl: model.url,
    args: [...ClaudeCli.streamJsonArgs, ...ClaudeCli.leanArgs, "--include-partial-messages"],
    env: { CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS: "1" }
  })
  yield* Console.log(dim(`claude (pid ${run.pid}) in ${run.cwd}`))
  yield* run.send(Control.request("init-1", { subtype: "initialize" }))
  yield* run.send(HostMessage.user(prompt))
  yield* Console.log(`${bold("> ")}${prompt}`)

  let inline = false
  yield* StreamJson.decodeStdout(run.stdout).pipe(
    Stream.runForEach((decoded) =>
      Effect.gen(function*() {
        const output = show(decoded)
        if (output !== undefined && "line" in output) {
          process.stdout.write(`${inline ? "\n" : ""}${output.line}\n`)
          inline = false
        } else if (output !== undefined) {
          process.stdout.write(output.inline)
          inline = !output.inline.endsWith("\n")
        }
        // The turn is over at `idle`, the authoritative end of work.
        if (
          decoded._tag === "Message" && decoded.message.type === "system" &&
          decoded.message.subtype === "session_state_changed" && decoded.message.state === "idle"
        ) {
          yield* run.closeStdin
        }
      })
    )
  )
  const exitCode = yield* run.exitCode
  const requests = yield* model.requests
  const seen = requests.filter((r) => FakeModel.messagesText(r).includes(prompt)).length
  yield* Console.log(dim(`CLI exited ${exitCode}; FakeModel got ${requests.length} request(s), ${seen} carrying the prompt`))
})

main.pipe(Effect.scoped, Effect.provide(NodeContext.layer), NodeRuntime.runMain)
