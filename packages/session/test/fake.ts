/**
 * Session options that run a FakeCli script in place of the real CLI (the
 * fake ignores the CLI flags that follow its entry), with short stop delays.
 */
import { FakeCli } from "@skein/testkit"
import * as Os from "node:os"
import type * as Session from "../src/Session.js"

export const fake = (script: FakeCli.Script, extra?: Partial<Session.SessionOptions>): Session.SessionOptions => {
  const cmd = FakeCli.command(script, { cliArgs: [] })
  return {
    cwd: Os.tmpdir(),
    executable: cmd.command,
    executableArgs: cmd.args,
    env: cmd.env,
    stopTimeouts: { stdinGrace: "200 millis", termGrace: "300 millis" },
    ...extra
  }
}
