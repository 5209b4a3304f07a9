/**
 * How a turn is shown: readably for a person (`human`), or as opencode's
 * canonical events, one JSON object a line (`canonical`, for `--json`).
 * Content goes to stdout; the command's own notes (a turn's cost, a
 * permission decision) go to stderr in human mode, so stdout stays the answer.
 */
import { Anthropic, type Canonical, CliMessage } from "@skein/protocol"
import { EventTranslator } from "@skein/serve"
import type { Turn } from "@skein/session"
import { Effect, Option, Ref } from "effect"
import * as Spinner from "./internal/spinner.js"

export interface Output {
  readonly turnStarted: (index: number) => Effect.Effect<void>
  readonly event: (event: Turn.SessionEvent) => Effect.Effect<void>
  readonly permission: (answer: {
    readonly requestId: string
    readonly toolName: string
    readonly allowed: boolean
    readonly why: string
  }) => Effect.Effect<void>
  readonly turnEnded: (index: number, summary: Turn.TurnSummary) => Effect.Effect<void>
  /** The CLI's session id, once the last turn is done: how to resume it. */
  readonly sessionId: (id: string) => Effect.Effect<void>
  /** No more turns. */
  readonly end: Effect.Effect<void>
}

// ---------------------------------------------------------------------------
// Human
// ---------------------------------------------------------------------------

const paint = (on: boolean) => (code: number) => (text: string) => on ? `\x1b[${code}m${text}\x1b[0m` : text

const flat = (text: string, max: number): string => {
  const one = text.replace(/\s+/g, " ").trim()
  return one.length > max ? `${one.slice(0, max - 1)}…` : one
}

const inputSummary = (input: unknown): string =>
  typeof input === "object" && input !== null
    ? Object.entries(input).map(([key, value]) => `${key}=${JSON.stringify(value)}`).join(", ")
    : JSON.stringify(input)

const resultText = (content: Anthropic.ToolResultBlock["content"]): string =>
  typeof content === "string"
    ? content
    : (content ?? []).map((block) => Anthropic.isKnownBlock(block) && block.type === "text" ? block.text : `[${block.type}]`).join(" ")

/**
 * Readable lines: text streamed as it comes, a line per tool call and result,
 * a note per turn. While the model or a tool is at work and no line is half
 * written, `spinner` spins (on a terminal); every write hides it first.
 */
export const human = (options: { readonly color: boolean; readonly spinner?: Spinner.Spinner | undefined }): Effect.Effect<Output> =>
  Effect.sync(() => {
    const spinner = options.spinner ?? Spinner.none
    const color = paint(options.color)
    const dim = color(2)
    const red = color(31)
    const green = color(32)
    const cyan = color(36)
    // Whether stdout is in the middle of a line of streamed text.
    let midLine = false
    const out = (text: string) =>
      Effect.zipRight(
        spinner.hide,
        Effect.sync(() => {
          process.stdout.write(text)
          if (text.length > 0) midLine = !text.endsWith("\n")
        })
      )
    const line = (text: string) => out(`${midLine ? "\n" : ""}${text}\n`)
    const note = (text: string) =>
      Effect.zipRight(
        spinner.hide,
        Effect.sync(() => {
          if (midLine) process.stdout.write("\n")
          midLine = false
          process.stderr.write(`${dim(text)}\n`)
        })
      )
    /** Spins while waiting, unless a line of text is half written. */
    const waiting = (label: string) => Effect.suspend(() => midLine ? Effect.void : spinner.show(label))

    const onStream = (event: CliMessage.StreamEvent["event"]): Effect.Effect<void> => {
      if (!CliMessage.isKnownStreamEvent(event)) return Effect.void
      if (event.type === "content_block_delta" && Anthropic.isKnownDelta(event.delta)) {
        if (event.delta.type === "text_delta") return out(event.delta.text)
        if (event.delta.type === "thinking_delta" && options.color) return out(dim(event.delta.thinking))
      }
      if (event.type === "content_block_stop" && midLine) return Effect.zipRight(out("\n"), waiting("thinking…"))
      return Effect.void
    }

    const onBlock = (block: Anthropic.ContentBlock): Effect.Effect<void> => {
      if (!Anthropic.isKnownBlock(block)) return Effect.void
      if (block.type === "tool_use") {
        return Effect.zipRight(line(cyan(`→ ${block.name}(${flat(inputSummary(block.input), 200)})`)), waiting(`${block.name}…`))
      }
      if (block.type === "tool_result") {
        const text = flat(resultText(block.content), 200)
        return Effect.zipRight(line(block.is_error === true ? red(`← error: ${text}`) : dim(`← ${text}`)), waiting("thinking…"))
      }
      return Effect.void
    }

    const onMessage = (m: CliMessage.CliMessage): Effect.Effect<void> => {
      switch (m.type) {
        case "stream_event":
          return onStream(m.event)
        case "assistant":
          return Effect.forEach(m.message.content, onBlock, { discard: true })
        case "user":
          return typeof m.message.content === "string" ? Effect.void : Effect.forEach(m.message.content, onBlock, { discard: true })
        case "system":
          if (m.subtype === "api_retry") return note(`retrying the model request (attempt ${m.attempt} of ${m.max_retries})`)
          if (m.subtype === "compact_boundary") return note("compacted the conversation")
          return Effect.void
        default:
          return Effect.void
      }
    }

    return {
      turnStarted: () => waiting("thinking…"),
      event: (event) => {
        switch (event._tag) {
          case "Message":
            return onMessage(event.message)
          case "Unknown":
            return Effect.void
          default:
            return note(`skipped a line the CLI printed (${event._tag.toLowerCase()})`)
        }
      },
      permission: ({ allowed, toolName, why }) =>
        Effect.zipRight(
          note(allowed ? green(`✓ ${toolName} allowed (${why})`) : red(`✗ ${toolName} denied: ${why}`)),
          waiting(allowed ? `${toolName}…` : "thinking…")
        ),
      turnEnded: (_, summary) => {
        const last = summary.results.at(-1)
        const time = last === undefined ? "" : ` · ${(last.duration_ms / 1000).toFixed(1)} s`
        const status = summary.interrupted
          ? "interrupted"
          : summary.isError
          ? red(`failed (${summary.failure?.reason ?? last?.subtype ?? "no result"})`)
          : "done"
        return note(
          `${status}${time} · ${summary.usage.inputTokens} in / ${summary.usage.outputTokens} out tokens · $${summary.costUsd.toFixed(4)}`
        )
      },
      sessionId: (id) => note(`session ${id}`),
      end: Effect.suspend(() => midLine ? out("\n") : spinner.hide)
    }
  })

// ---------------------------------------------------------------------------
// Canonical
// ---------------------------------------------------------------------------

const cliSessionIdOf = (event: Turn.SessionEvent): string | undefined =>
  event._tag === "Message" && "session_id" in event.message && typeof event.message.session_id === "string"
    ? event.message.session_id
    : undefined

/**
 * opencode's canonical events through serve's EventTranslator. The
 * translator is keyed by the CLI's session id, which the first message that
 * carries one gives (`resume` knows it up front); inputs before it wait.
 */
export const canonical = (options: { readonly cliSessionId?: string | undefined; readonly cwd: string }): Effect.Effect<Output> =>
  Effect.gen(function*() {
    const initial = (cliSessionId: string) => EventTranslator.initial({ cliSessionId, cwd: options.cwd, createdAt: Date.now() })
    const state = yield* Ref.make(Option.map(Option.fromNullable(options.cliSessionId), initial))
    const waiting = yield* Ref.make<ReadonlyArray<EventTranslator.Input>>([])
    const print = (events: ReadonlyArray<Canonical.CanonicalEvent>) =>
      Effect.sync(() => {
        for (const event of events) process.stdout.write(`${JSON.stringify(event)}\n`)
      })
    const run = (current: EventTranslator.State, inputs: ReadonlyArray<EventTranslator.Input>) => {
      let next = current
      const events: Array<Canonical.CanonicalEvent> = []
      for (const input of inputs) {
        const [after, emitted] = EventTranslator.step(next, input)
        next = after
        events.push(...emitted)
      }
      return Effect.as(print(events), next)
    }
    const feed = (input: EventTranslator.Input, sessionId?: string) =>
      Effect.gen(function*() {
        const current = yield* Ref.get(state)
        if (Option.isSome(current)) return yield* Ref.set(state, Option.some(yield* run(current.value, [input])))
        if (sessionId === undefined) return yield* Ref.update(waiting, (inputs) => [...inputs, input])
        const next = yield* run(initial(sessionId), [...yield* Ref.getAndSet(waiting, []), input])
        yield* Ref.set(state, Option.some(next))
      })
    return {
      turnStarted: (turn) => feed({ _tag: "TurnStarted", turn, origin: "host" }),
      event: (event) => feed({ _tag: "Cli", event, receivedAt: Date.now() }, cliSessionIdOf(event)),
      permission: ({ allowed, requestId }) => feed({ _tag: "PermissionAnswered", requestId, reply: allowed ? "once" : "reject" }),
      turnEnded: (turn, summary) => feed({ _tag: "TurnEnded", turn, interrupted: summary.interrupted }),
      // Not an opencode event: skein's own, last, so a script learns what to `--resume`.
      sessionId: (id) => Effect.sync(() => void process.stdout.write(`${JSON.stringify({ type: "skein.session", properties: { sessionId: id } })}\n`)),
      end: feed({ _tag: "End" })
    }
  })
