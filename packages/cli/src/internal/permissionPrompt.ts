/**
 * A permission ask on a terminal, answered by one key: allow once, allow
 * always (this tool, for the rest of the command), or deny. Ctrl-C denies
 * and is passed on as SIGINT, so it interrupts the turn as it would anywhere.
 */
import type { Permissions } from "@skein/session"
import { Effect } from "effect"
import * as Keys from "./keys.js"

export type Answer = "once" | "always" | "deny"

const flat = (text: string, max: number) => {
  const one = text.replace(/\s+/g, " ").trim()
  return one.length > max ? `${one.slice(0, max - 1)}…` : one
}

const inputSummary = (input: { readonly [key: string]: unknown }) =>
  flat(Object.entries(input).map(([key, value]) => `${key}=${JSON.stringify(value)}`).join(", "), 120)

const answerOf = (key: string): Answer | "interrupt" | undefined => {
  switch (key) {
    case "y":
    case "Y":
    case "\r":
    case "\n":
      return "once"
    case "a":
    case "A":
      return "always"
    case "n":
    case "N":
    case "d":
    case "\x1b":
      return "deny"
    case "\x03":
      return "interrupt"
    default:
      return undefined
  }
}

/** Asks on stderr and waits for a key that answers. */
export const ask = (request: Permissions.PermissionRequest, color: boolean): Effect.Effect<Answer> =>
  Effect.gen(function*() {
    const bold = (text: string) => color ? `\x1b[1;33m${text}\x1b[0m` : text
    process.stderr.write(
      `${bold(`? ${request.toolName}`)} wants to run with ${inputSummary(request.input)}\n` +
        `  [y] allow once   [a] allow ${request.toolName} always   [n] deny  `
    )
    let answer: Answer | "interrupt" | undefined
    while (answer === undefined) answer = answerOf(yield* Keys.next)
    process.stderr.write(`${answer === "interrupt" ? "deny (Ctrl-C)" : answer}\n`)
    if (answer !== "interrupt") return answer
    process.kill(process.pid, "SIGINT")
    return "deny"
  })
