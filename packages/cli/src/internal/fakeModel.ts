/**
 * The model behind `--fake-model`: testkit's FakeModel on 127.0.0.1 with a
 * few conventions, so the command can be tried (and tested) offline:
 * - a prompt line `$ <command>` gets a Bash tool call running it, and then a
 *   line saying what it printed; `$& <command>` runs it in the background
 *   (a task; the full CLI only, see `--full-cli`);
 * - a prompt containing `[slow]` gets a long answer streamed slowly (to try Ctrl-C);
 * - a compaction request (`skein compact --pass summarize`) gets a short summary;
 * - anything else gets FakeModel's friendly greeting.
 */
import { Anthropic } from "@skein/protocol"
import { FakeModel } from "@skein/testkit"
import { Duration, Option } from "effect"

const lastUser = (request: FakeModel.RecordedRequest): Anthropic.MessageParam | undefined =>
  Option.match(request.messagesRequest, {
    onNone: () => undefined,
    onSome: (body) => body.messages.findLast((message) => message.role === "user")
  })

const blocksOf = (message: Anthropic.MessageParam): ReadonlyArray<Anthropic.ContentBlock> =>
  typeof message.content === "string" ? [{ type: "text", text: message.content }] : message.content

const textOf = (content: unknown): string => {
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return ""
  return content.map((c: unknown) => typeof c === "object" && c !== null && "text" in c && typeof c.text === "string" ? c.text : "").join(" ")
}

const slowAnswer = Array.from(
  { length: 40 },
  (_, i) => `Part ${i + 1}: skein runs each Claude Code process as a supervised fiber, and Ctrl-C interrupts the turn.`
).join(" ")

/** What the fake model summarizes any conversation as. */
export const compactionSummary = "The person greeted the fake model; it answered with its greeting each time. Nothing is pending."

/** The reply to a conversation request, following the conventions above. */
export const reply = (request: FakeModel.RecordedRequest): FakeModel.Reply => {
  if (FakeModel.isCompaction(request)) return FakeModel.text(`<summary>${compactionSummary}</summary>`)
  const message = lastUser(request)
  if (!FakeModel.isConversation(request) || message === undefined) return FakeModel.text("OK.")
  const blocks = blocksOf(message)
  const known = blocks.filter(Anthropic.isKnownBlock)
  const result = known.find((block) => block.type === "tool_result")
  if (result !== undefined) {
    const printed = textOf(result.content).trim().split("\n")[0] ?? ""
    const failed = result.is_error === true
    return FakeModel.text(failed ? `The command was not run: ${printed}` : `The command printed: ${printed}`)
  }
  const text = known.map((block) => block.type === "text" ? block.text : "").join("\n")
  const background = text.split("\n").find((line) => line.startsWith("$& "))
  if (background !== undefined) {
    return FakeModel.toolUse("Bash", { command: background.slice(3), description: "Run it in the background", run_in_background: true })
  }
  const command = text.split("\n").find((line) => line.startsWith("$ "))
  if (command !== undefined) return FakeModel.toolUse("Bash", { command: command.slice(2), description: "Run the command" })
  if (text.includes("[slow]")) return FakeModel.withDelay(FakeModel.text(slowAnswer), Duration.millis(40))
  const fallback = FakeModel.defaultFallback
  return typeof fallback === "function" ? fallback(request) : fallback
}

/** Starts the model for the scope. */
export const start = FakeModel.make({ fallback: reply })
