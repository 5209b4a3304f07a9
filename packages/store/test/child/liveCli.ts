/**
 * A stand-in for a live Claude Code CLI in the middle of writing its
 * transcript. Arguments: <config root> <transcript path> <session id> <cwd>.
 * It registers itself as the CLI does (`<root>/sessions/<pid>.json`), writes
 * one whole entry and half of the next one (no newline yet), prints
 * "appending", and stays alive until it is killed.
 */
import * as fs from "node:fs"
import * as path from "node:path"

const [root = "", transcript = "", sessionId = "", cwd = ""] = process.argv.slice(2)

const registry = path.join(root, "sessions")
fs.mkdirSync(registry, { recursive: true, mode: 0o700 })
fs.writeFileSync(
  path.join(registry, `${process.pid}.json`),
  JSON.stringify({ pid: process.pid, sessionId, cwd, startedAt: Date.now(), kind: "interactive" })
)

const entry = (uuid: string, parentUuid: string | null, text: string) =>
  JSON.stringify({
    type: "user",
    uuid,
    parentUuid,
    isSidechain: false,
    sessionId,
    timestamp: new Date(0).toISOString(),
    cwd,
    message: { role: "user", content: text }
  })

fs.mkdirSync(path.dirname(transcript), { recursive: true, mode: 0o700 })
const whole = `${entry("u1", null, "hello")}\n`
const next = entry("u2", "u1", "a line the CLI is still writing")
fs.appendFileSync(transcript, whole + next.slice(0, Math.floor(next.length / 2)), { mode: 0o600 })
process.stdout.write("appending\n")
setInterval(() => {}, 1000)
