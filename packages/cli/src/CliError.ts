/**
 * What the command reports to a person: one line on stderr and an exit code.
 * Every failure below the command is turned into one of these at its edge.
 */
import * as Schema from "effect/Schema"

/** A failure with the one line that explains it; `code` is the exit status (default 1). */
export class CliError extends Schema.TaggedError<CliError>()("CliError", {
  message: Schema.String,
  code: Schema.optionalWith(Schema.Number, { default: () => 1 })
}) {}

/** The usual exit status after Ctrl-C. */
export const interruptedCode = 130

export const fail = (message: string, code?: number): CliError => new CliError(code === undefined ? { message } : { message, code })

/** Folds a multi-line message (a help document, a CLI's stderr) into one line. */
export const oneLine = (text: string): string =>
  // eslint-disable-next-line no-control-regex
  text.replace(/\x1b\[[0-9;]*m/g, "").split("\n").map((line) => line.trim()).filter((line) => line.length > 0).join(" ")
