/**
 * A stand-in for the Claude Code CLI, small enough to run a thousand at once.
 *
 * The real CLI takes about 200 MB per process; this is a POSIX shell script
 * (about 1 MB under dash) that speaks the stream-json bus with builtins only,
 * so it forks nothing per message. It answers `initialize` (and any other
 * control request, with an empty success), and each user message with a
 * canned turn: `system/init` (first turn only), `session_state_changed
 * running`, one `assistant` text, a `result`, `session_state_changed idle`.
 * It exits 0 at stdin's end. A user message is matched by its leading `type`,
 * which is how hosts write it (`type` first); a control request by its
 * `"type":"control_request"` anywhere in the line, since the Agent SDK writes
 * `request_id` first.
 *
 * The messages are FakeCli's shapes (`internal/cliMessages`), so they decode
 * as known messages; the script only fills in ids. The session id derives
 * from the process id, and `cwd` is `$PWD` as it is (a path with `"` or `\`
 * would not be valid JSON: use plain temporary folders).
 */
import * as Fs from "node:fs"
import * as Messages from "./internal/cliMessages.js"

export interface Options {
  /** The assistant's text and the result's. Default "stand-in reply". */
  readonly text?: string | undefined
  /** The shell that runs the script. Default `/bin/sh` (dash on Debian). */
  readonly shell?: string | undefined
}

export interface Command {
  readonly command: string
  /** Put these before the CLI's own flags: the script reads none of them. */
  readonly args: ReadonlyArray<string>
}

/** Placeholders in the canned messages, replaced by shell variables. */
const SID = "@SID@"
const UUID = "@UUID@"
const CWD = "@CWD@"
const REQUEST = "@REQUEST@"

const placeholderIds: Messages.Ids = { sessionId: SID, uuid: () => UUID }

/** A shell word printing `json` with its placeholders expanded: single-quoted text, double-quoted variables. */
const shellJson = (value: unknown): string => {
  const text = JSON.stringify(value)
  const quoted = `'${text.replaceAll("'", `'\\''`)}'`
  return quoted
    .replaceAll(SID, `'"$sid"'`)
    .replaceAll(UUID, `'"$u"'`)
    .replaceAll(CWD, `'"$PWD"'`)
    .replaceAll(REQUEST, `'"$rid"'`)
}

const emit = (value: unknown): string => `next; printf '%s\\n' ${shellJson(value)}`

/** The script, for `sh -c`. */
export const script = (options?: Options): string => {
  const text = options?.text ?? "stand-in reply"
  const ids = placeholderIds
  const turn = [
    emit(Messages.sessionStateChanged(ids, "running")),
    emit(Messages.assistantText(ids, text)),
    emit(Messages.result(ids, { subtype: "success", result: text, numTurns: 1, durationMs: 1, costUsd: 0 })),
    emit(Messages.sessionStateChanged(ids, "idle"))
  ]
  return [
    `sid="00000000-0000-4000-8000-$((100000000000 + $$))"`,
    `n=100000000000`,
    `turns=0`,
    // Fresh ids without a fork: a counter with a fixed number of digits.
    `next() { n=$((n + 1)); u="00000000-0000-4000-9000-$n"; }`,
    `while IFS= read -r line || [ -n "$line" ]; do`,
    `  case $line in`,
    `    '{"type":"user"'*)`,
    `      turns=$((turns + 1))`,
    `      if [ "$turns" = 1 ]; then ${emit(Messages.systemInit(ids, CWD))}; fi`,
    ...turn.map((line) => `      ${line}`),
    `      ;;`,
    `    *'"type":"control_request"'*)`,
    `      rid=\${line#*'"request_id":"'}; rid=\${rid%%'"'*}`,
    `      case $line in`,
    `        *'"subtype":"initialize"'*) printf '%s\\n' ${shellJson(Messages.initializeResponse(REQUEST))} ;;`,
    `        *) printf '%s\\n' ${
      shellJson({ type: "control_response", response: { subtype: "success", request_id: REQUEST, response: {} } })
    } ;;`,
    `      esac ;;`,
    `  esac`,
    `  line=`,
    `done`,
    `exit 0`
  ].join("\n")
}

/** How to start the stand-in: `command` and `args`, then any CLI flags (ignored, in `$1…`). */
export const command = (options?: Options): Command => ({
  command: options?.shell ?? "/bin/sh",
  args: ["-c", script(options), "stand-in-cli"]
})

/**
 * Writes the stand-in as an executable file at `path` (`#!` and the script,
 * mode 0755) and returns `path`: for a host that takes a CLI as one
 * executable path and passes only the CLI's own flags, such as the Agent
 * SDK's `pathToClaudeCodeExecutable`.
 */
export const writeExecutable = (path: string, options?: Options): string => {
  Fs.writeFileSync(path, `#!${options?.shell ?? "/bin/sh"}\n${script(options)}\n`, { mode: 0o755 })
  return path
}
