/**
 * Entry point of the FakeCli child process. Arguments are ignored; the
 * script comes from `SKEIN_FAKE_CLI_SCRIPT` (see `FakeCli.ts`).
 */
import { Effect } from "effect"
import { run } from "../internal/fakeCliRunner.js"

// Not NodeRuntime.runMain: it installs SIGTERM/SIGINT handlers, and the fake
// must die to SIGTERM unless a script says otherwise.
Effect.runPromise(run).catch((error: unknown) => {
  process.stderr.write(`fake-cli: ${String(error)}\n`)
  process.exit(70)
})
