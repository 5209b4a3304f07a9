/**
 * Parked spares (CLI 2.1.3xx): a CLI started with `--await-claim` boots,
 * answers `initialize` and then waits as no session yet. It defers the
 * session-scoped start-up (moving to its working directory, CLAUDE.md and
 * git context, SessionStart hooks, registering the session and placing its
 * transcript) until a `claim_session` control request names the working
 * directory; until then it refuses user messages (`not_claimed`) and writes
 * no transcript. The claim keeps the `--session-id` the spare was started
 * with, and answers with it (`{status, cwd, session_id, parked_ms, …}`).
 *
 * The request is not in the protocol's schemas (the Agent SDK marks it
 * internal), so it is written here as its line. Besides `cwd` it takes
 * `env` (three credential keys only), `additional_directories`,
 * `permission_mode`, `system_prompt`, `append_system_prompt`, `agents`,
 * `title`, `sdk_mcp_servers`, `include_initialize` and `workspace_trust`;
 * the pool sends only `cwd`, since its spares already started with the
 * session's own flags and `initialize`.
 */
import { Data, Duration, Effect, Option } from "effect"
import * as Path from "node:path"
import { CliExited } from "../SessionError.js"
import type * as Launch from "./launch.js"
import * as Warmup from "./warmup.js"

/** The flag that parks a spare. */
export const flag = "--await-claim"

/** The launch options of a parked spare: the session's own, plus the flag. */
export const parked = (options: Launch.LaunchOptions): Launch.LaunchOptions => ({
  ...options,
  extraArgs: [...(options.extraArgs ?? []), flag]
})

/**
 * A release that does not know the flag (the 2.0 line, any before the
 * spare mode) exits at once with commander's `error: unknown option
 * '--await-claim'` before it answers `initialize`: that is how the pool
 * learns a profile's CLI cannot park, with no version table to keep.
 */
export const isUnsupported = (error: unknown): boolean =>
  error instanceof CliExited && error.stderrTail.includes(`unknown option '${flag}'`)

/** The spare would not be claimed: refused, no answer in time, or gone. */
export class ClaimRefused extends Data.TaggedError("ClaimRefused")<{ readonly reason: string }> {}

/** How long a claim may take before the spare is given up (it usually takes 50–80 ms). */
export const defaultTimeout = Duration.seconds(5)

/**
 * Claims a parked spare for a session in `cwd` (made absolute, as the CLI
 * requires) and waits for the answer, so
 * that a refusal leaves the session free to start cold instead. Returns the
 * process with what was read meanwhile first in `stdout`.
 */
export const claim = (
  launched: Launch.Launched,
  cwd: string,
  timeout: Duration.DurationInput = defaultTimeout
): Effect.Effect<Launch.Launched, ClaimRefused> => {
  const id = Warmup.requestId("claim")
  const line = `${JSON.stringify({ type: "control_request", request_id: id, request: { subtype: "claim_session", cwd: Path.resolve(cwd) } })}\n`
  return Warmup.exchange(launched, [{ id, line }], timeout).pipe(
    Effect.flatMap(([[answer], claimed]) =>
      Option.match(Option.flatten(Option.fromNullable(answer)), {
        onNone: () => new ClaimRefused({ reason: "no answer to claim_session" }),
        onSome: (answer) =>
          answer.response.subtype === "error"
            ? new ClaimRefused({ reason: answer.response.error })
            : Effect.succeed(claimed)
      })
    ),
    Effect.withSpan("SessionPool.claim")
  )
}
